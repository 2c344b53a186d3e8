package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdCode    = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.*)$`)
	notSlug   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// TestDocLinks checks that every relative link of the README and of the
// pages of docs/ names a file of the repository, and that a link to a
// heading (page.md#heading) names a heading of that page.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append([]string{"../README.md"}, pages...) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(mdCode.ReplaceAllString(string(md), ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, heading, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", strings.TrimPrefix(page, "../"), link, err)
				continue
			}
			if heading != "" && !headings(t, target)[heading] {
				t.Errorf("%s: link %s: %s has no such heading", strings.TrimPrefix(page, "../"), link, strings.TrimPrefix(target, "../"))
			}
		}
	}
}

// headings returns the anchors that the headings of a Markdown page get:
// lower case, punctuation dropped, spaces as hyphens.
func headings(t *testing.T, page string) map[string]bool {
	md, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(md), "")
	anchors := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		h := strings.ToLower(strings.ReplaceAll(m[1], "`", ""))
		anchors[strings.ReplaceAll(notSlug.ReplaceAllString(strings.TrimSpace(h), ""), " ", "-")] = true
	}
	return anchors
}
