// A list of user ids to edit: each as a chip with a remove button, and a
// field that adds more (known users offered by name to administrators).
import { useId } from "react";
import type { User } from "../api/identity";
import { userLabel } from "../permissions";
import { addIds, whoIs } from "./sharing";

interface Props {
  /** The group's name ("Shared with"); the field is "<label> (user id)". */
  label: string;
  ids: string[];
  onChange: (ids: string[]) => void;
  /** What is typed and not added yet (kept by the form, which adds it on save). */
  draft: string;
  onDraft: (text: string) => void;
  me: string;
  /** Users to offer and name (administrators'); empty otherwise. */
  users: readonly User[];
  help?: string;
}

export function UserIds({ label, ids, onChange, draft, onDraft, me, users, help }: Props) {
  const listId = useId();
  const inputId = useId();
  const add = () => {
    onChange(addIds(ids, draft));
    onDraft("");
  };
  return (
    <div className="user-ids" role="group" aria-label={label}>
      <label htmlFor={inputId}>{label} (user id)</label>
      {ids.length > 0 && (
        <ul className="chips">
          {ids.map((id) => (
            <li key={id} className="chip" title={id}>
              {whoIs(id, me, users)}
              <button type="button" className="link" aria-label={`Remove ${whoIs(id, me, users)}`} onClick={() => onChange(ids.filter((x) => x !== id))}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="add-row">
        <input
          id={inputId}
          value={draft}
          list={users.length > 0 ? listId : undefined}
          placeholder="usr_…"
          autoComplete="off"
          onChange={(e) => onDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter") {
              e.preventDefault();
              if (draft.trim()) add();
            }
          }}
        />
        <button type="button" onClick={add} disabled={!draft.trim()}>
          Add
        </button>
      </div>
      {users.length > 0 && (
        <datalist id={listId}>
          {users
            .filter((u) => !ids.includes(u.user_id))
            .map((u) => (
              <option key={u.user_id} value={u.user_id}>
                {userLabel(u)}
                {u.email && u.email !== userLabel(u) ? ` (${u.email})` : ""}
              </option>
            ))}
        </datalist>
      )}
      {help && <span className="muted small">{help}</span>}
    </div>
  );
}
