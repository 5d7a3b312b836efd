import { afterEach, describe, expect, it, vi } from "vitest";
import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { ToolPart, type AnyToolPart } from "./ToolPart";

afterEach(cleanup);

describe("ToolPart", () => {
  it("asks for an approval and answers it", async () => {
    const part = {
      type: "dynamic-tool",
      toolName: "shell",
      toolCallId: "c1",
      state: "approval-requested",
      input: { command: "rm -rf build" },
      approval: { id: "ia_1" },
    } as AnyToolPart;
    const decide = vi.fn(async () => {});
    render(<ToolPart part={part} onDecide={decide} />);
    expect(screen.getByText("waiting for approval")).toBeTruthy();
    expect(screen.getAllByText("rm -rf build").length).toBeGreaterThan(0);
    fireEvent.click(screen.getByRole("button", { name: "Approve" }));
    expect(decide).toHaveBeenCalledWith("ia_1", "approve");
    expect(await screen.findByRole("button", { name: "Approving…" })).toBeTruthy();
  });

  it("shows a shell call's output and its exit code", () => {
    const part = {
      type: "dynamic-tool",
      toolName: "shell",
      toolCallId: "c2",
      state: "output-available",
      input: { command: "false" },
      output: { stdout: "out", stderr: "err", exit_code: 1 },
    } as AnyToolPart;
    render(<ToolPart part={part} onDecide={async () => {}} />);
    expect(screen.getByTestId("tool-output").textContent).toBe("out\nerr\n[exit 1]");
    expect(screen.queryByRole("button", { name: "Approve" })).toBeNull();
  });

  it("shows the server's error when the answer fails", async () => {
    const part = {
      type: "dynamic-tool",
      toolName: "shell",
      toolCallId: "c3",
      state: "approval-requested",
      input: {},
      approval: { id: "ia_2" },
    } as AnyToolPart;
    render(<ToolPart part={part} onDecide={async () => Promise.reject(new Error("interaction closed"))} />);
    fireEvent.click(screen.getByRole("button", { name: "Reject" }));
    expect((await screen.findByRole("alert")).textContent).toBe("interaction closed");
  });
});
