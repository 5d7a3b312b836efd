// The loading, error and empty states every view shows the same way.
import type { ReactNode } from "react";
import { ApiError, errorText } from "../api/client";
import { useSignOut } from "../auth";

export function Loading({ label = "Loading…" }: { label?: string }) {
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> {label}
    </div>
  );
}

export function ErrorBanner({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const signOut = useSignOut();
  const unauthorized = error instanceof ApiError && error.status === 401;
  return (
    <div className="banner error" role="alert">
      <span>{errorText(error)}</span>
      {unauthorized ? (
        <button onClick={signOut}>Sign in again</button>
      ) : (
        onRetry && <button onClick={onRetry}>Retry</button>
      )}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children && <div className="muted">{children}</div>}
    </div>
  );
}
