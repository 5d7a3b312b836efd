// A button that copies a text to the clipboard and says so (or, where the
// browser refuses, asks to copy it by hand).
import { useEffect, useState } from "react";

export function CopyButton({ text, label = "Copy", className }: { text: string; label?: string; className?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const t = setTimeout(() => setState("idle"), 2500);
    return () => clearTimeout(t);
  }, [state]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState("copied");
    } catch {
      setState("failed");
    }
  };
  return (
    <>
      <button type="button" className={className} onClick={() => void copy()}>
        {state === "copied" ? "Copied" : label}
      </button>
      <span role="status" className={state === "failed" ? "error small" : "visually-hidden"}>
        {state === "copied" ? "Copied to the clipboard." : state === "failed" ? "The browser refused: select it and copy." : ""}
      </span>
    </>
  );
}
