// AstraBox code-context driver for Java: a persistent JVM that runs
// notebook-style cells for execd through the JShell API (jdk.jshell), with
// the local execution engine, so a cell's System.out and System.err are
// the output pipes execd reads. It speaks the protocol of package pydriver
// (see pydriver.go and javadriver.go): requests on fd 3 (one JSON object
// per line), control messages on fd 4, the run's marker on fds 1 and 2.
//
// Written for Java 11 (the first release whose launcher runs a source file),
// with no library beyond the JDK: javadriver.go starts it as
// `java --source 11 /proc/self/fd/5` with this file on fd 5.

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;

public class Driver {
    static final int MAX_TEXT = 4 << 20;

    static OutputStream control;
    static PrintStream out;
    static PrintStream err;
    static JShell shell;
    static volatile boolean running;
    static volatile boolean interrupted;

    public static void main(String[] args) throws Exception {
        out = System.out;
        err = System.err;
        control = new FileOutputStream("/proc/self/fd/4");
        BufferedReader requests = new BufferedReader(new InputStreamReader(
                new FileInputStream("/proc/self/fd/3"), StandardCharsets.UTF_8));
        shell = JShell.builder().executionEngine("local").out(out).err(err).in(System.in).build();
        onSigint();
        send("{\"type\":\"ready\",\"python\":" + quote("java " + Runtime.version()) + "}");
        int n = 0;
        for (String line; (line = requests.readLine()) != null; ) {
            Map<String, String> req = parseObject(line);
            n++;
            run(req.getOrDefault("code", ""), req.getOrDefault("marker", ""), n);
        }
        System.exit(0);
    }

    // onSigint makes SIGINT (an interrupt from execd) stop a running cell;
    // between cells it is ignored. sun.misc.Signal is reached by reflection
    // so that compiling this file prints no warning about it.
    static void onSigint() {
        try {
            Class<?> signal = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            InvocationHandler ih = (proxy, method, margs) -> {
                if (method.getName().equals("handle") && running) {
                    interrupted = true;
                    shell.stop();
                }
                return null;
            };
            Object h = Proxy.newProxyInstance(handler.getClassLoader(), new Class<?>[] {handler}, ih);
            signal.getMethod("handle", signal, handler)
                    .invoke(null, signal.getConstructor(String.class).newInstance("INT"), h);
        } catch (ReflectiveOperationException | RuntimeException e) {
            err.println("astrabox java driver: cannot handle SIGINT (interrupts will end the context): " + e);
        }
    }

    // run evaluates code snippet by snippet: the first that is rejected or
    // throws ends the cell with an error; the value of a last snippet that
    // is an expression is the result.
    static void run(String code, String marker, int n) throws IOException {
        send("{\"type\":\"started\",\"n\":" + n + "}");
        String error = null;
        String value = null;
        interrupted = false;
        running = true;
        try {
            SourceCodeAnalysis sca = shell.sourceCodeAnalysis();
            String rest = code;
            while (error == null && !rest.trim().isEmpty()) {
                SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(rest);
                if (ci.completeness() == SourceCodeAnalysis.Completeness.EMPTY) {
                    break;
                }
                String src = ci.source();
                if (src == null || !ci.completeness().isComplete()) {
                    src = rest;
                    rest = "";
                } else {
                    rest = ci.remaining();
                }
                value = null;
                for (SnippetEvent ev : shell.eval(src)) {
                    if (ev.causeSnippet() != null) {
                        continue;
                    }
                    if (ev.status() == Snippet.Status.REJECTED) {
                        error = rejected(ev.snippet());
                        break;
                    }
                    if (ev.exception() != null) {
                        error = thrown(ev.exception());
                        break;
                    }
                    Snippet.SubKind sk = ev.snippet().subKind();
                    if (sk == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND || ev.snippet().kind() == Snippet.Kind.EXPRESSION) {
                        value = ev.value();
                    }
                }
                if (interrupted && error == null) {
                    error = errorMessage("Interrupted", "the execution was interrupted", List.of("Interrupted: the execution was interrupted"));
                }
            }
        } catch (RuntimeException e) {
            error = errorMessage(e.getClass().getSimpleName(), String.valueOf(e.getMessage()), List.of(e.toString()));
        } finally {
            running = false;
        }
        System.out.flush();
        System.err.flush();
        out.flush();
        err.flush();
        if (error != null) {
            send(error);
        } else if (value != null && !value.isEmpty()) {
            send("{\"type\":\"result\",\"data\":{\"text/plain\":" + quote(clip(value)) + "}}");
        }
        byte[] mark = (marker + "\n").getBytes(StandardCharsets.UTF_8);
        out.write(mark, 0, mark.length);
        out.flush();
        err.write(mark, 0, mark.length);
        err.flush();
        send("{\"type\":\"done\",\"marked\":[1,2]}");
    }

    static String rejected(Snippet s) {
        List<String> tb = new ArrayList<>();
        List<String> msgs = new ArrayList<>();
        for (Diag d : shell.diagnostics(s).collect(Collectors.toList())) {
            if (!d.isError()) {
                continue;
            }
            String m = d.getMessage(Locale.ROOT);
            msgs.add(m);
            tb.add("Error: " + m);
            tb.add(excerpt(s.source(), (int) d.getStartPosition(), (int) d.getEndPosition()));
        }
        if (msgs.isEmpty()) {
            msgs.add("the snippet was rejected");
            tb.add(s.source());
        }
        return errorMessage("CompilationException", String.join("\n", msgs), tb);
    }

    static String excerpt(String src, int start, int end) {
        if (start < 0 || start > src.length()) {
            return src;
        }
        int from = src.lastIndexOf('\n', Math.max(start - 1, 0)) + 1;
        int to = src.indexOf('\n', start);
        if (to < 0) {
            to = src.length();
        }
        return src.substring(from, to);
    }

    static String thrown(JShellException e) {
        String value = e.getMessage() == null ? "" : e.getMessage();
        String head = e.getClass().getName();
        if (e instanceof EvalException) {
            head = ((EvalException) e).getExceptionClassName();
        }
        List<String> tb = new ArrayList<>();
        tb.add(value.isEmpty() ? head : head + ": " + value);
        for (StackTraceElement f : e.getStackTrace()) {
            tb.add("\tat " + f);
        }
        for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
            tb.add("Caused by: " + c);
        }
        return errorMessage(e.getClass().getSimpleName(), value, tb);
    }

    static String errorMessage(String ename, String evalue, List<String> traceback) {
        StringBuilder b = new StringBuilder("{\"type\":\"error\",\"ename\":").append(quote(ename))
                .append(",\"evalue\":").append(quote(clip(evalue))).append(",\"traceback\":[");
        for (int i = 0; i < traceback.size(); i++) {
            b.append(i == 0 ? "" : ",").append(quote(clip(traceback.get(i))));
        }
        return b.append("]}").toString();
    }

    static String clip(String s) {
        return s.length() > MAX_TEXT ? s.substring(0, MAX_TEXT) + "... [truncated]" : s;
    }

    static synchronized void send(String msg) throws IOException {
        control.write((msg + "\n").getBytes(StandardCharsets.UTF_8));
        control.flush();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20 || (Character.isSurrogate(c) && !pairedAt(s, i))) {
                        b.append(String.format("\\u%04x", (int) (Character.isSurrogate(c) ? 0xfffd : c)));
                    } else {
                        b.append(c);
                        if (Character.isHighSurrogate(c)) {
                            b.append(s.charAt(++i));
                        }
                    }
            }
        }
        return b.append('"').toString();
    }

    static boolean pairedAt(String s, int i) {
        char c = s.charAt(i);
        return Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    }

    // parseObject reads a JSON object whose values are all strings (a
    // request as execd sends it); anything else is refused.
    static Map<String, String> parseObject(String s) {
        Map<String, String> m = new HashMap<>();
        int[] pos = {skip(s, 0)};
        expect(s, pos, '{');
        while (true) {
            pos[0] = skip(s, pos[0]);
            if (pos[0] < s.length() && s.charAt(pos[0]) == '}') {
                return m;
            }
            String k = parseString(s, pos);
            pos[0] = skip(s, pos[0]);
            expect(s, pos, ':');
            pos[0] = skip(s, pos[0]);
            m.put(k, parseString(s, pos));
            pos[0] = skip(s, pos[0]);
            if (pos[0] < s.length() && s.charAt(pos[0]) == ',') {
                pos[0]++;
            }
        }
    }

    static int skip(String s, int i) {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
        return i;
    }

    static void expect(String s, int[] pos, char c) {
        if (pos[0] >= s.length() || s.charAt(pos[0]) != c) {
            throw new IllegalArgumentException("bad request: expected '" + c + "' at " + pos[0]);
        }
        pos[0]++;
    }

    static String parseString(String s, int[] pos) {
        expect(s, pos, '"');
        StringBuilder b = new StringBuilder();
        for (int i = pos[0]; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"') {
                pos[0] = i + 1;
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = s.charAt(++i);
            switch (e) {
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'u': b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16)); i += 4; break;
                default: b.append(e);
            }
        }
        throw new IllegalArgumentException("bad request: unterminated string");
    }
}
