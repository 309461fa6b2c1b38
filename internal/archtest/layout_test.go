package archtest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// maxTopLevelFolders keeps the top level a reader takes in at a glance.
const maxTopLevelFolders = 14

// tableFolder is a row of the README's layout table: | `name/` | ... |
var tableFolder = regexp.MustCompile("(?m)^\\| `([a-z]+)/` \\|")

// TestTheLayoutTableMatchesTheTree fails on a top-level folder the README's
// layout table does not describe, a row for a folder that is gone, or more
// top-level folders than a reader holds in mind.
func TestTheLayoutTableMatchesTheTree(t *testing.T) {
	readme, err := os.ReadFile(root + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for _, m := range tableFolder.FindAllStringSubmatch(string(readme), -1) {
		inTable[m[1]] = true
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || !tracked(t, e.Name()) {
			continue
		}
		folders = append(folders, e.Name())
		if !inTable[e.Name()] {
			t.Errorf("top-level folder %s/ has no row in the README's layout table", e.Name())
		}
		delete(inTable, e.Name())
	}
	for name := range inTable {
		t.Errorf("the README's layout table describes %s/, which is not in the tree", name)
	}
	if len(folders) > maxTopLevelFolders {
		t.Errorf("%d top-level folders %v: at most %d", len(folders), folders, maxTopLevelFolders)
	}
}

// tracked reports whether a top-level folder is the product's, not one the
// root .gitignore names (what a build or a run leaves behind: bin/, a data
// directory, a workspace).
func tracked(t *testing.T, name string) bool {
	ignore, err := os.ReadFile(root + "/.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		if strings.Trim(strings.TrimSpace(line), "/") == name {
			return false
		}
	}
	return true
}
