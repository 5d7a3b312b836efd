// The end every admin form shares: its error, then Save and Cancel.

/** The form's error (an alert), if any, then its submit button (disabled
 * and saying "Saving…" while busy) and Cancel. Place it last in a
 * `form-grid` form: both rows span the grid. */
export function FormFooter({
  error,
  busy,
  onCancel,
  saveLabel = "Save",
}: {
  error: string | null;
  busy: boolean;
  onCancel: () => void;
  saveLabel?: string;
}) {
  return (
    <>
      {error && (
        <p role="alert" className="error span-all">
          {error}
        </p>
      )}
      <div className="actions span-all">
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Saving…" : saveLabel}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </>
  );
}
