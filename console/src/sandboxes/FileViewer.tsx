// Shows a text file of a sandbox (the first 1 MiB); binary files are
// offered for download instead.
import { useClient } from "../auth";
import type { FileInfo } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { ErrorBanner, Loading } from "../ui/states";
import { bytes } from "../ui/format";

const maxView = 1 << 20;

interface Props {
  sandboxId: string;
  file: FileInfo;
  onClose: () => void;
}

export function FileViewer({ sandboxId, file, onClose }: Props) {
  const client = useClient();
  const text = useAsync(async () => {
    if (file.size === 0) return "";
    const resp = await client.raw(client.execdPath(sandboxId, "/files/download"), { headers: { Range: `bytes=0-${maxView - 1}` } }, { path: file.path });
    const buf = new Uint8Array(await resp.arrayBuffer());
    if (buf.includes(0)) return null; // binary
    return new TextDecoder().decode(buf);
  }, [client, sandboxId, file.path]);
  return (
    <section className="card viewer" aria-label={`Contents of ${file.path}`}>
      <header>
        <code>{file.path}</code>
        <span className="muted small">{bytes(file.size)}</span>
        <button onClick={onClose} aria-label="Close the file">
          Close
        </button>
      </header>
      {text.error !== undefined && <ErrorBanner error={text.error} onRetry={text.reload} />}
      {text.loading && <Loading />}
      {text.data === null && <p className="muted">A binary file: download it to open it.</p>}
      {typeof text.data === "string" && (
        <pre data-testid="file-content">
          {text.data}
          {file.size > maxView && <span className="muted">{"\n"}… (the first {bytes(maxView)} of {bytes(file.size)})</span>}
        </pre>
      )}
    </section>
  );
}
