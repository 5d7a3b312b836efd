// The form that creates a RuntimeProfile or updates one (at its version).
import { useState, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { RuntimeProfile } from "../api/types";
import { FormFooter } from "../ui/FormFooter";

interface Props {
  profile: RuntimeProfile | null;
  onDone: () => void;
  onCancel: () => void;
}

export function ProfileForm({ profile, onDone, onCancel }: Props) {
  const client = useClient();
  const [f, setF] = useState({
    name: profile?.name ?? "",
    backend: profile?.backend ?? "",
    image: profile?.image ?? "",
    baseURL: profile?.model?.base_url ?? "",
    apiKey: "",
    models: profile?.model?.models?.join(", ") ?? "",
    poolSize: profile?.poolSize ?? 0,
    idleTimeout: profile?.idleTimeout ?? 0,
  });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const set = <K extends keyof typeof f>(k: K, v: (typeof f)[K]) => setF({ ...f, [k]: v });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const base: RuntimeProfile = profile ? { ...profile } : { name: f.name, engine_kinds: ["astrabox"] };
    delete base.api_key_set; // output only
    const p: RuntimeProfile = {
      ...base,
      name: f.name.trim(),
      backend: f.backend.trim() || undefined,
      image: f.image.trim() || undefined,
      poolSize: f.poolSize || undefined,
      idleTimeout: f.idleTimeout || undefined,
      model: f.baseURL.trim()
        ? {
            base_url: f.baseURL.trim(),
            api_key: f.apiKey || undefined,
            models: f.models.split(",").map((m) => m.trim()).filter(Boolean),
          }
        : undefined,
    };
    try {
      await client.putProfile(p);
      onDone();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card form-grid" onSubmit={submit} aria-label={profile ? `Edit ${profile.name}` : "New runtime profile"}>
      <label>
        Name
        <input value={f.name} onChange={(e) => set("name", e.target.value)} required disabled={!!profile} pattern="[A-Za-z0-9][A-Za-z0-9._-]*" />
      </label>
      <label>
        Backend
        <input value={f.backend} onChange={(e) => set("backend", e.target.value)} placeholder="server default" />
      </label>
      <label>
        Image
        <input value={f.image} onChange={(e) => set("image", e.target.value)} placeholder="backend default" />
      </label>
      <label>
        Model endpoint (base URL)
        <input type="url" value={f.baseURL} onChange={(e) => set("baseURL", e.target.value)} placeholder="https://api.openai.com/v1" />
      </label>
      <label>
        Model API key
        <input
          type="password"
          autoComplete="off"
          value={f.apiKey}
          onChange={(e) => set("apiKey", e.target.value)}
          placeholder={profile?.api_key_set ? "unchanged (sealed on the server)" : "sk-…"}
        />
      </label>
      <label>
        Models (comma-separated)
        <input value={f.models} onChange={(e) => set("models", e.target.value)} placeholder="gpt-4o-mini" />
      </label>
      <label>
        Pool size
        <input type="number" min={0} max={100} value={f.poolSize} onChange={(e) => set("poolSize", Number(e.target.value))} />
      </label>
      <label>
        Idle timeout (seconds)
        <input type="number" min={0} value={f.idleTimeout} onChange={(e) => set("idleTimeout", Number(e.target.value))} />
      </label>
      <FormFooter error={error} busy={busy} onCancel={onCancel} />
    </form>
  );
}
