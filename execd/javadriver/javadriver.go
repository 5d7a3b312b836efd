// Package javadriver holds the Java side of execd's java code contexts: a
// driver (Driver.java) that turns a JDK's `java` into a notebook-like
// interpreter through the JShell API, without Jupyter or a kernel in the
// box. It speaks the protocol of package pydriver (requests on fd 3,
// control messages on fd 4, the run's marker on fds 1 and 2), so execd
// drives it as it drives python and node.
//
// Java's launcher compiles and runs a source file (Java 11 and later), but
// only a file it can open by name and seek in, not a pipe: so execd hands
// the driver's source over as an unlinked file on fd SourceFD, which the
// launcher opens as /proc/self/fd/SourceFD. It needs a JDK (the jdk.jshell
// and jdk.compiler modules); a bare JRE cannot run it.
//
// A cell is split into snippets as jshell splits its input; they run in
// order in one JShell state, so variables, methods, classes and imports
// persist from cell to cell. The value of a last snippet that is an
// expression is the result (as jshell prints it: a string in quotes). A
// snippet that does not compile ends the cell with a CompilationException
// error naming the compiler's messages; one that throws ends it with the
// JShell exception (EvalException, carrying the thrown class, or
// UnresolvedReferenceException). SIGINT stops a running cell (an
// Interrupted error); between cells it is ignored.
package javadriver

import (
	_ "embed"
	"strconv"
)

//go:embed Driver.java
var source []byte

// SourceFD is the descriptor of the file holding the driver's source, in
// the launcher.
const SourceFD = 5

// Args returns the argv that starts the driver with the JDK launcher java.
// The output encodings are UTF-8 whatever the box's locale (the property
// names of Java 11-17 and of 18 and later).
func Args(java string) []string {
	return []string{java,
		"-XX:+UseSerialGC", "-Xshare:auto",
		"-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
		"-Dstdout.encoding=UTF-8", "-Dstderr.encoding=UTF-8",
		"--source", "11", "/proc/self/fd/" + strconv.Itoa(SourceFD)}
}

// Source is the driver's source, for the file on fd SourceFD.
func Source() []byte { return source }
