package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Tool names.
const (
	toolShell     = "shell"
	toolReadFile  = "read_file"
	toolWriteFile = "write_file"
	toolEditFile  = "edit_file"
	toolListDir   = "list_dir"
	toolSearch    = "search"
)

// toolOrder is every tool, in the order they are offered.
var toolOrder = []string{toolShell, toolReadFile, toolWriteFile, toolEditFile, toolListDir, toolSearch}

// Tools returns the names of every built-in tool; Config.Tools is a subset
// of them.
func Tools() []string { return append([]string(nil), toolOrder...) }

// toolInfo is how a tool is described to the model.
type toolInfo struct {
	description string
	parameters  string // a JSON Schema object
}

var toolInfos = map[string]toolInfo{
	toolShell: {
		description: "Run a bash command in the workspace and return its exit code, stdout and stderr " +
			"(each cut to 32 KiB, keeping head and tail). The command runs in its own process group " +
			"and is killed at its timeout. Stdin is empty.",
		parameters: `{"type":"object","properties":{
			"command":{"type":"string","description":"the bash command line"},
			"timeout_seconds":{"type":"integer","description":"kill the command after this many seconds (default %d)"}},
			"required":["command"]}`,
	},
	toolReadFile: {
		description: "Read a text file. Returns at most 2000 lines and 64 KiB from the given line on, the file's total line count, and whether the content was cut.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"file path, relative to the workspace or absolute"},
			"offset":{"type":"integer","description":"first line to return, counting from 1 (default 1)"},
			"limit":{"type":"integer","description":"most lines to return (default and maximum 2000)"}},
			"required":["path"]}`,
	},
	toolWriteFile: {
		description: "Create or overwrite a file with the given content; missing parent directories are created.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"file path, relative to the workspace or absolute"},
			"content":{"type":"string","description":"the whole new content"}},
			"required":["path","content"]}`,
	},
	toolEditFile: {
		description: "Replace text in a file. old_string must occur exactly once unless replace_all is true; include enough surrounding text to make it unique.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"file path, relative to the workspace or absolute"},
			"old_string":{"type":"string","description":"the exact text to replace"},
			"new_string":{"type":"string","description":"the replacement"},
			"replace_all":{"type":"boolean","description":"replace every occurrence (default false)"}},
			"required":["path","old_string","new_string"]}`,
	},
	toolListDir: {
		description: "List a directory: name, type (file, dir, symlink, other) and size of at most 1000 entries, sorted by name.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"directory, relative to the workspace or absolute (default: the workspace)"}}}`,
	},
	toolSearch: {
		description: "Search files for a Go regular expression (RE2 syntax) and return at most 200 matching lines with their path and line number. Binary files and .git directories are skipped.",
		parameters: `{"type":"object","properties":{
			"pattern":{"type":"string","description":"the regular expression"},
			"path":{"type":"string","description":"file or directory to search (default: the workspace)"},
			"glob":{"type":"string","description":"only files whose name matches this pattern, e.g. *.go (a pattern with / matches the path below the searched directory)"}},
			"required":["pattern"]}`,
	},
}

// toolSpecs returns the function tools offered to the model for names.
func toolSpecs(names []string, shellTimeoutSeconds int) []toolSpec {
	var specs []toolSpec
	for _, name := range names {
		info := toolInfos[name]
		params := info.parameters
		if name == toolShell {
			params = fmt.Sprintf(params, shellTimeoutSeconds)
		}
		specs = append(specs, toolSpec{Type: "function", Function: functionSpec{
			Name:        name,
			Description: info.description,
			Parameters:  compactJSON(params),
		}})
	}
	return specs
}

// compactJSON removes the layout of a schema written for reading.
func compactJSON(s string) json.RawMessage {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(fmt.Sprintf("agent: tool schema: %v", err))
	}
	b, _ := json.Marshal(v)
	return b
}

// systemPrompt is the first message of every model request. The Agent's
// instructions, when given, follow the fixed text.
func systemPrompt(workspace string, tools []string, instructions string) string {
	var b strings.Builder
	b.WriteString("You are an autonomous agent working inside a sandbox: an isolated Linux machine " +
		"that is yours to use. Nothing you do there can harm the user's own computer.\n\n")
	fmt.Fprintf(&b, "Your workspace is %s. Relative paths in tool calls resolve there, and shell commands start there.\n\n", workspace)
	if len(tools) == 0 {
		b.WriteString("You have no tools in this conversation: answer from what you know.\n")
	} else {
		fmt.Fprintf(&b, "Your tools: %s.\n\n", strings.Join(tools, ", "))
		b.WriteString("Act rather than describe: when a task needs files read, written or commands run, " +
			"do it with your tools instead of telling the user how to. Check your work (run the code, the tests) " +
			"before you say it is done. Tool outputs are bounded; read large files in parts. " +
			"If the user denies a tool call, do not retry it: adapt or ask.\n\n" +
			"When you are finished, reply with a short summary of what you did and what you found.\n")
	}
	if s := strings.TrimSpace(instructions); s != "" {
		b.WriteString("\n# Instructions\n\n")
		b.WriteString(s)
		b.WriteString("\n")
	}
	return b.String()
}
