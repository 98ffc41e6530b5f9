package chat_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestTutorialShowsTheCode: every code block of docs/tutorial.md marked
// <!-- file: PATH --> is the file at PATH, byte for byte, so the page shows
// the code CI compiles and runs. After changing the code, paste it into the
// page (or the other way round).
func TestTutorialShowsTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```go\n(.*?)```\n").FindAllSubmatch(page, -1)
	want := map[string]bool{"examples/chat/chat.go": false, "examples/chat/chat_test.go": false, "examples/chat/cmd/chat/main.go": false}
	for _, b := range blocks {
		path := string(b[1])
		file, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("docs/tutorial.md shows %s: %v", path, err)
			continue
		}
		if string(file) != string(b[2]) {
			t.Errorf("docs/tutorial.md: the code block of %s differs from the file; copy the file into the page", path)
		}
		want[path] = true
	}
	for path, shown := range want {
		if !shown {
			t.Errorf("docs/tutorial.md does not show %s (a ```go block after <!-- file: %s -->)", path, path)
		}
	}
}
