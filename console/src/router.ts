// Hash routing: the console's own paths live in the URL's fragment
// (#/chat/AGENT/SESSION, #/sandboxes/ID, #/admin/agents), so no client
// route can collide with a server route.
import { useEffect, useState } from "react";

/** The route's segments: "#/chat/a1/s2" is ["chat", "a1", "s2"]. */
export function useRoute(): string[] {
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const on = () => setHash(window.location.hash);
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return parseRoute(hash);
}

export function parseRoute(hash: string): string[] {
  return hash
    .replace(/^#\/?/, "")
    .split("/")
    .filter(Boolean)
    .map(decodeURIComponent);
}

/** The href of a route. */
export function href(...segments: string[]): string {
  return "#/" + segments.map(encodeURIComponent).join("/");
}

export function navigate(...segments: string[]): void {
  window.location.hash = href(...segments);
}
