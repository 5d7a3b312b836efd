// The files of a sandbox, through execd: list a directory, go into and up
// from it, upload files into it, download a file, view a text file.
import { useRef, useState, type ChangeEvent, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { FileInfo } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { bytes, relativeTime } from "../ui/format";
import { FileViewer } from "./FileViewer";
import { baseName, join, parent } from "./paths";

// Where the agent and the SDKs work.
const startDir = "/workspace";

export function FileBrowser({ sandboxId }: { sandboxId: string }) {
  const client = useClient();
  const [dir, setDir] = useState(startDir);
  const [typed, setTyped] = useState(startDir);
  const [viewing, setViewing] = useState<FileInfo | null>(null);
  const [notice, setNotice] = useState<{ error: boolean; text: string } | null>(null);
  const [uploading, setUploading] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);
  const list = useAsync(() => client.listDir(sandboxId, dir), [client, sandboxId, dir]);

  const go = (d: string) => {
    setDir(d);
    setTyped(d);
    setViewing(null);
  };
  const onGo = (e: FormEvent) => {
    e.preventDefault();
    if (typed.trim()) go(typed.trim());
  };
  const upload = async (e: ChangeEvent<HTMLInputElement>) => {
    const files = [...(e.target.files ?? [])];
    if (files.length === 0) return;
    setUploading(true);
    setNotice(null);
    try {
      for (const f of files) await client.upload(sandboxId, join(dir, f.name), f);
      setNotice({ error: false, text: `Uploaded ${files.map((f) => f.name).join(", ")}` });
      await list.reload();
    } catch (err) {
      setNotice({ error: true, text: `Upload failed: ${errorText(err)}` });
    } finally {
      setUploading(false);
      if (fileInput.current) fileInput.current.value = "";
    }
  };
  const download = async (f: FileInfo) => {
    setNotice(null);
    try {
      const blob = await (await client.download(sandboxId, f.path)).blob();
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = baseName(f.path);
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      setNotice({ error: true, text: `Download failed: ${errorText(err)}` });
    }
  };

  const entries = [...(list.data ?? [])].sort(
    (a, b) => Number(b.type === "directory") - Number(a.type === "directory") || a.path.localeCompare(b.path),
  );
  return (
    <div className="files">
      <div className="files-bar">
        <button onClick={() => go(parent(dir))} disabled={dir === "/"} aria-label="Up one directory">
          ↑ Up
        </button>
        <form onSubmit={onGo} className="path-form">
          <label htmlFor="files-path" className="visually-hidden">
            Directory
          </label>
          <input id="files-path" value={typed} onChange={(e) => setTyped(e.target.value)} spellCheck={false} />
          <button type="submit">Go</button>
        </form>
        <label className={`button primary${uploading ? " disabled" : ""}`}>
          {uploading ? "Uploading…" : "Upload"}
          <input ref={fileInput} type="file" multiple className="visually-hidden" onChange={(e) => void upload(e)} disabled={uploading} data-testid="upload-input" />
        </label>
      </div>
      {notice && (
        <p role={notice.error ? "alert" : "status"} className={notice.error ? "error" : "ok"}>
          {notice.text}
        </p>
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {list.loading && !list.data && <Loading />}
      {list.data && entries.length === 0 && <Empty title="This directory is empty" />}
      {entries.length > 0 && (
        <div className="table-wrap">
          <table className="table" aria-label={`Files in ${dir}`}>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Size</th>
                <th scope="col">Modified</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {entries.map((f) => (
                <tr key={f.path} data-testid="file-row">
                  <td>
                    {f.type === "directory" ? (
                      <button className="link" onClick={() => go(f.path)}>
                        📁 {baseName(f.path)}/
                      </button>
                    ) : f.type === "file" ? (
                      <button className="link" onClick={() => setViewing(f)}>
                        {baseName(f.path)}
                      </button>
                    ) : (
                      <span>{baseName(f.path)}</span>
                    )}
                  </td>
                  <td>{f.type === "file" ? bytes(f.size) : ""}</td>
                  <td>{relativeTime(f.modified_at)}</td>
                  <td>
                    {f.type === "file" && (
                      <button onClick={() => void download(f)} aria-label={`Download ${baseName(f.path)}`}>
                        Download
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {viewing && <FileViewer sandboxId={sandboxId} file={viewing} onClose={() => setViewing(null)} />}
    </div>
  );
}
