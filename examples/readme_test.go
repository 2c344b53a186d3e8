package examples_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Markers around a region of an example file that the README shows.
const (
	regionBegin = "// readme-begin"
	regionEnd   = "// readme-end"
)

// TestReadmeCode checks that every Go block in the README and in the pages
// of docs/ is a copy of an example program, so that it compiles and runs:
// a whole file, or a region between marker lines. Every region must appear
// in the README or in a page of docs/.
func TestReadmeCode(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	copies, err := exampleCode(".")
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, page := range append([]string{"../README.md"}, pages...) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../")
		blocks, err := goBlocks(string(md))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(blocks) == 0 && name == "README.md" {
			t.Fatal("README.md has no ```go block")
		}
		for _, b := range blocks {
			i := slices.IndexFunc(copies, func(c code) bool { return c.text == b.text })
			if i < 0 {
				t.Errorf("%s line %d: the Go block is not a copy of an example file or region; %s", name, b.line, closest(b, copies))
				continue
			}
			shown[copies[i].where] = true
		}
	}
	for _, c := range copies {
		if c.region && !shown[c.where] {
			t.Errorf("%s is marked for the README but shown neither there nor in docs/", c.where)
		}
	}
}

// code is a piece of Go text: a README block, an example file, or a region
// of one.
type code struct {
	where  string // file and line
	line   int
	text   string
	region bool
}

// goBlocks returns the README's fenced blocks marked as Go.
func goBlocks(md string) ([]code, error) {
	var blocks []code
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("the ```go block at line %d is not closed", start)
		}
		blocks = append(blocks, code{line: start, text: strings.Join(lines[start:i], "\n") + "\n"})
	}
	return blocks, nil
}

// exampleCode returns every non-test Go file under dir and every marked
// region in them, dedented.
func exampleCode(dir string) ([]code, error) {
	var all []code
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		all = append(all, code{where: path, line: 1, text: string(b)})
		regions, err := markedRegions(path, string(b))
		all = append(all, regions...)
		return err
	})
	return all, err
}

// markedRegions returns the regions of a file between marker lines,
// without the markers and the blank lines next to them.
func markedRegions(path, src string) ([]code, error) {
	var regions []code
	lines := strings.Split(src, "\n")
	begin := -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case regionBegin:
			if begin >= 0 {
				return nil, fmt.Errorf("%s:%d: %s inside the region begun at line %d", path, i+1, regionBegin, begin+1)
			}
			begin = i
		case regionEnd:
			if begin < 0 {
				return nil, fmt.Errorf("%s:%d: %s without %s", path, i+1, regionEnd, regionBegin)
			}
			body := lines[begin+1 : i]
			for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
				body = body[1:]
			}
			for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
				body = body[:len(body)-1]
			}
			if len(body) == 0 {
				return nil, fmt.Errorf("%s:%d: empty region", path, begin+1)
			}
			regions = append(regions, code{where: path + ":" + strconv.Itoa(begin+1), line: begin + 1, text: dedent(body), region: true})
			begin = -1
		}
	}
	if begin >= 0 {
		return nil, fmt.Errorf("%s:%d: %s without %s", path, begin+1, regionBegin, regionEnd)
	}
	return regions, nil
}

// dedent removes the indentation that every non-blank line shares.
func dedent(lines []string) string {
	prefix, first := "", true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = indent, false
		}
		for !strings.HasPrefix(indent, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimPrefix(l, prefix))
		b.WriteByte('\n')
	}
	return b.String()
}

// closest names the candidate that shares the longest run of leading lines
// with b, and the first line where they differ.
func closest(b code, candidates []code) string {
	bl := strings.Split(b.text, "\n")
	best, bestN := code{}, -1
	for _, c := range candidates {
		cl := strings.Split(c.text, "\n")
		n := 0
		for n < len(bl) && n < len(cl) && bl[n] == cl[n] {
			n++
		}
		if n > bestN {
			best, bestN = c, n
		}
	}
	if bestN <= 0 {
		return "no example starts like it"
	}
	cl := strings.Split(best.text, "\n")
	got, want := "(end)", "(end)"
	if bestN < len(bl) {
		got = bl[bestN]
	}
	if bestN < len(cl) {
		want = cl[bestN]
	}
	return "closest is " + best.where + ", which differs at the block's line " + strconv.Itoa(bestN+1) + ":\n\tREADME:  " + got + "\n\texample: " + want
}
