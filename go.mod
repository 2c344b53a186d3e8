module github.com/distlock-go/distlock

go 1.25
