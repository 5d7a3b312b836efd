// The message box: Enter sends, Shift+Enter breaks the line; while a reply
// runs, Stop interrupts it.
import { useState, type FormEvent, type KeyboardEvent } from "react";

interface Props {
  busy: boolean;
  disabled: boolean;
  onSend: (text: string) => void;
  onInterrupt: () => void;
}

export function Composer({ busy, disabled, onSend, onInterrupt }: Props) {
  const [text, setText] = useState("");
  const send = (e?: FormEvent) => {
    e?.preventDefault();
    const t = text.trim();
    if (!t || busy || disabled) return;
    onSend(t);
    setText("");
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      send();
    }
  };
  return (
    <form className="composer" onSubmit={send}>
      <label htmlFor="composer-input" className="visually-hidden">
        Message
      </label>
      <textarea
        id="composer-input"
        rows={2}
        placeholder={busy ? "The agent is replying…" : "Ask the agent… (Enter sends, Shift+Enter adds a line)"}
        value={text}
        disabled={disabled}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKey}
      />
      {busy ? (
        <button type="button" className="danger" onClick={onInterrupt}>
          Stop
        </button>
      ) : (
        <button type="submit" className="primary" disabled={disabled || !text.trim()}>
          Send
        </button>
      )}
    </form>
  );
}
