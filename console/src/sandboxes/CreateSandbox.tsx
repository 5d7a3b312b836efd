// The form that creates a sandbox, optionally from a RuntimeProfile.
import { useState, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { CreateSandboxRequest, RuntimeProfile } from "../api/types";

interface Props {
  profiles: RuntimeProfile[];
  onCreated: (id: string) => void;
}

export function CreateSandbox({ profiles, onCreated }: Props) {
  const client = useClient();
  const [profile, setProfile] = useState("");
  const [image, setImage] = useState("");
  const [minutes, setMinutes] = useState(60);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const req: CreateSandboxRequest = { timeout: minutes * 60, metadata: { "created-by": "console" } };
    if (profile) req.extensions = { profile };
    if (image.trim()) req.image = { uri: image.trim() };
    try {
      const sb = await client.createSandbox(req);
      onCreated(sb.id);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card create-form" onSubmit={submit} aria-label="Create a sandbox">
      <label>
        Profile
        <select value={profile} onChange={(e) => setProfile(e.target.value)}>
          <option value="">(server default)</option>
          {profiles.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
              {p.backend ? ` · ${p.backend}` : ""}
            </option>
          ))}
        </select>
      </label>
      <label>
        Image
        <input value={image} onChange={(e) => setImage(e.target.value)} placeholder="the profile's or backend's" />
      </label>
      <label>
        Expires after (minutes)
        <input type="number" min={1} max={10080} value={minutes} onChange={(e) => setMinutes(Number(e.target.value))} required />
      </label>
      <button type="submit" className="primary" disabled={busy}>
        {busy ? "Creating…" : "Create sandbox"}
      </button>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </form>
  );
}
