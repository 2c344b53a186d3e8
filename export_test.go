package distlock

// Hooks for the external tests.
var (
	LinesHeld   = linesHeld
	LineWaiting = lineWaiting
)
