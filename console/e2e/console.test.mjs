// The console in a real headless Chromium (playwright-core driving the
// system's chromium), against a live AstraBox server with native
// sandboxes and a scripted fake model, started by console_test.go, which
// passes what it set up in the environment:
//
//   CONSOLE_URL, API_KEY    the server and its key
//   CHROMIUM                the browser executable
//   RELEASE_URL             POST here opens the fake model's held reply
//   SCREENSHOT_DIR          where screenshots go
//   TOOL_INPUT, TOOL_OUTPUT, TOOL_TEXT       a chat with a tool call
//   HOLD_INPUT, HOLD_FIRST, HOLD_TEXT        a reply held after its first piece
//   APPROVE_INPUT, APPROVE_OUTPUT, APPROVE_TEXT   a call needing approval
//
// The tests run in order on one page, as a person would use it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (console_test.go sets it)`);
  return v;
};

const url = env("CONSOLE_URL");
const shots = env("SCREENSHOT_DIR");
const timeout = 60_000;
let browser;
let page;

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: env("CHROMIUM"),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true, colorScheme: "light" });
  page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (err) => console.log(`# page error: ${err.message}`));
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`) });

/** Opens a new session of the agent named name and waits for its empty conversation. */
async function newSession(agentName) {
  await page.getByRole("link", { name: "Chat", exact: true }).click();
  const select = page.getByLabel("Agent", { exact: true });
  const value = await select.locator("option", { hasText: agentName }).getAttribute("value");
  await select.selectOption(value);
  await page.getByRole("button", { name: "New session" }).click();
  await page.getByText("No messages yet").waitFor();
}

/**
 * Types text and sends it with Enter, as a person does once the composer
 * offers Send: while the last reply is still streaming it offers Stop, and
 * Enter sends nothing.
 */
async function send(text) {
  const box = page.getByLabel("Message", { exact: true });
  await box.fill(text);
  await page.getByRole("button", { name: "Send", exact: true }).waitFor();
  await box.press("Enter");
  await page.waitForFunction(() => document.querySelector("#composer-input")?.value === ""); // taken
}

const lastReply = () => page.getByTestId("message-assistant").last();

/** The start of a message's first line, as a Session titled by it shows it. */
const firstLine = (text) => text.split("\n")[0].slice(0, 40);

test("sign in", async () => {
  await page.goto(url);
  await page.getByLabel("API key", { exact: true }).fill("not-the-key");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "UNAUTHORIZED" }).waitFor();
  await page.getByLabel("API key", { exact: true }).fill(env("API_KEY"));
  await page.getByRole("link", { name: /^Sign in with / }).waitFor(); // the identity provider is offered too
  await shot("signin");
  await page.getByLabel("API key", { exact: true }).press("Enter"); // the keyboard works too
  await page.getByRole("navigation", { name: "Sections" }).waitFor();
  await page.getByLabel("Agent", { exact: true }).waitFor();
  // The server's key acts as the built-in administrator.
  await page.getByTestId("user-menu").click();
  await page.getByTestId("user-id").filter({ hasText: "admin" }).waitFor();
  await page.getByTestId("user-role").filter({ hasText: "admin" }).waitFor();
  await page.keyboard.press("Escape");
});

test("chat with a tool call", async () => {
  await newSession("coder");
  await send(env("TOOL_INPUT"));
  const reply = lastReply();
  await reply.getByText(env("TOOL_TEXT")).waitFor();
  const tool = reply.getByTestId("tool-call");
  await tool.getByText("done").waitFor();
  await tool.locator("summary").click(); // open it: input and output
  await tool.getByTestId("tool-output").filter({ hasText: env("TOOL_OUTPUT") }).waitFor();
  await page.getByTestId("session-state").filter({ hasText: "READY" }).waitFor();
  // The Session is titled by its first message, in the heading and the list.
  await page.getByRole("heading", { level: 2 }).filter({ hasText: firstLine(env("TOOL_INPUT")) }).waitFor();
  await page.getByRole("navigation", { name: "Sessions" }).getByText(firstLine(env("TOOL_INPUT"))).waitFor();
  await shot("chat-tool-call");
});

test("reload mid-reply and see it go on", async () => {
  await send(env("HOLD_INPUT"));
  await lastReply().getByText(env("HOLD_FIRST")).waitFor();
  await page.reload();
  // The history and the reply in progress come back, the reply resumed
  // from its start, once.
  await page.getByText(env("TOOL_TEXT")).waitFor();
  await lastReply().getByText(env("HOLD_FIRST")).waitFor();
  await page.getByTestId("session-state").filter({ hasText: "BUSY" }).waitFor();
  const resp = await fetch(env("RELEASE_URL"), { method: "POST" });
  assert.equal(resp.status, 204);
  await lastReply().getByText(env("HOLD_TEXT")).waitFor();
  await page.getByTestId("session-state").filter({ hasText: "READY" }).waitFor();
  assert.equal(await page.getByTestId("message-assistant").count(), 2, "one assistant message per reply");
  assert.equal(await page.getByTestId("message-user").count(), 2, "one user message per input");
});

test("approve a tool call", async () => {
  await newSession("careful");
  await send(env("APPROVE_INPUT"));
  const approve = page.getByRole("button", { name: "Approve", exact: true });
  await approve.waitFor();
  await shot("chat-approval");
  await approve.click();
  const reply = lastReply();
  await reply.getByText(env("APPROVE_TEXT")).waitFor();
  await reply.getByTestId("tool-call").getByText("done").waitFor();
  await reply.getByTestId("tool-call").locator("summary").click();
  await reply.getByTestId("tool-output").filter({ hasText: env("APPROVE_OUTPUT") }).waitFor();
  assert.equal(await approve.count(), 0, "the approval buttons are gone once answered");
});

test("test a profile's model endpoint", async () => {
  await page.getByRole("link", { name: "Admin", exact: true }).click();
  await page.getByRole("tab", { name: "Runtime profiles" }).click();
  const card = page.getByTestId("profile-card").filter({ hasText: "test" });
  await card.getByRole("button", { name: "Test model endpoint" }).click();
  await card.getByTestId("model-check").filter({ hasText: "OK: fake-1 answered" }).waitFor();
  await shot("admin-profiles");
});

test("keep a secret in a vault and attach it to an agent", async () => {
  const value = "ghp-console-e2e-0451-never-shown";
  const notInPage = async (when) => {
    const html = await page.content();
    const inputs = await page.evaluate(() => [...document.querySelectorAll("input, textarea")].map((i) => i.value));
    assert.ok(!html.includes(value), `the secret's value is in the page's DOM ${when}`);
    assert.ok(!inputs.some((v) => v.includes(value)), `the secret's value is in an input ${when}`);
  };
  await page.getByRole("tab", { name: "Vaults" }).click();
  await page.getByRole("button", { name: "New vault" }).click();
  const create = page.getByRole("form", { name: "New vault" });
  await create.getByLabel("Name", { exact: true }).fill("github");
  await create.getByRole("button", { name: "Save" }).click();
  const card = page.getByTestId("vault-card").filter({ has: page.getByRole("heading", { name: "github" }) });
  await card.getByText("No secrets yet.").waitFor();

  await card.getByRole("button", { name: "Add secret" }).click();
  const form = card.getByRole("form", { name: "New secret in github" });
  await form.getByLabel("Name (environment variable)").fill("GITHUB_TOKEN");
  const input = form.getByLabel("Value", { exact: true });
  assert.equal(await input.getAttribute("type"), "password");
  await input.fill(value);
  await form.getByLabel("Host", { exact: true }).fill("api.github.com");
  await form.getByLabel("Path prefix", { exact: true }).fill("/repos");
  await form.getByRole("button", { name: "Save secret" }).click();
  await card.getByRole("status").filter({ hasText: "Saved GITHUB_TOKEN." }).waitFor();
  await card.getByTestId("secret-row").filter({ hasText: "GITHUB_TOKEN" }).filter({ hasText: "api.github.com/repos" }).waitFor();
  await notInPage("after saving it");

  // The server keeps it sealed: its answer has the secret's name, not its value.
  const listed = await (await fetch(`${url}/api/v1/vaults`, { headers: { "OPEN-SANDBOX-API-KEY": env("API_KEY") } })).text();
  assert.ok(listed.includes("GITHUB_TOKEN") && !listed.includes(value), "GET /api/v1/vaults names the secret without its value");

  await page.getByRole("link", { name: "Agents", exact: true }).click();
  await page.getByRole("button", { name: "New agent" }).click();
  const agent = page.getByRole("form", { name: "New agent" });
  await agent.getByLabel("Name", { exact: true }).fill("vaulted");
  await agent.getByRole("combobox", { name: /^Runtime profile/ }).selectOption("test");
  await agent.getByLabel("Model", { exact: true }).fill("fake-1");
  await agent.getByRole("checkbox", { name: /^github/ }).check();
  await agent.getByRole("button", { name: "Save" }).click();
  await page.getByRole("row").filter({ hasText: "vaulted" }).getByRole("cell", { name: "github", exact: true }).waitFor();

  // A vault an Agent uses is not deleted, and the console says by whom.
  await page.getByRole("link", { name: "Admin", exact: true }).click();
  await page.getByRole("tab", { name: "Vaults" }).click();
  await card.getByText("vaulted", { exact: true }).waitFor();
  page.once("dialog", (d) => d.accept());
  await card.getByRole("button", { name: "Delete vault" }).click();
  await card.getByRole("alert").filter({ hasText: "VAULT_IN_USE" }).filter({ hasText: "agent vaulted" }).waitFor();
  await shot("admin-vaults");
  await notInPage("on the Vaults tab");
  await page.reload();
  await card.getByTestId("secret-row").filter({ hasText: "GITHUB_TOKEN" }).waitFor();
  await notInPage("after a reload");
});

test("open a terminal and run a command", async () => {
  await page.getByRole("link", { name: "Sandboxes", exact: true }).click();
  await page.getByRole("heading", { name: "Sandboxes", exact: true }).waitFor();
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await page.getByTestId("sandbox-state").filter({ hasText: "Running" }).waitFor();
  await page.getByTestId("terminal-status").filter({ hasText: "Connected" }).waitFor();
  await page.getByTestId("terminal").click();
  await page.keyboard.type("echo console-$((6*7))\n");
  await page.locator(".xterm-rows").getByText("console-42").waitFor();
  await shot("terminal");
});

test("upload, view and download a file", async () => {
  await page.getByRole("tab", { name: "Files" }).click();
  await page.getByLabel("Directory", { exact: true }).waitFor();
  const body = `hello from the console test\n${"line\n".repeat(3)}`;
  await page.getByTestId("upload-input").setInputFiles({ name: "console-note.txt", mimeType: "text/plain", buffer: Buffer.from(body) });
  await page.getByRole("status").filter({ hasText: "Uploaded console-note.txt" }).waitFor();
  await page.getByRole("button", { name: "console-note.txt", exact: true }).click();
  await page.getByTestId("file-content").filter({ hasText: "hello from the console test" }).waitFor();
  await shot("files");
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download console-note.txt" }).click(),
  ]);
  assert.equal(download.suggestedFilename(), "console-note.txt");
  const chunks = [];
  for await (const c of await download.createReadStream()) chunks.push(c);
  assert.equal(Buffer.concat(chunks).toString(), body);
});

test("pause, resume and delete a sandbox", async () => {
  const state = page.getByTestId("sandbox-state");
  await page.getByRole("button", { name: "Pause", exact: true }).click();
  await state.filter({ hasText: "Paused" }).waitFor();
  await page.getByRole("button", { name: "Resume", exact: true }).click();
  await state.filter({ hasText: "Running" }).waitFor();
  const id = (await page.getByRole("heading", { level: 1 }).textContent()).trim();
  await page.getByRole("link", { name: "← Sandboxes" }).click();
  const row = page.getByTestId("sandbox-row").filter({ has: page.getByTitle(id, { exact: true }) });
  await row.getByText("Running").waitFor();
  await shot("sandboxes");
  page.once("dialog", (d) => d.accept());
  await row.getByRole("button", { name: "Delete", exact: true }).click();
  await row.waitFor({ state: "detached" });
});

test("a phone in dark mode", async () => {
  await page.emulateMedia({ colorScheme: "dark" });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole("link", { name: "Chat", exact: true }).click();
  const select = page.getByLabel("Agent", { exact: true });
  await select.selectOption(await select.locator("option", { hasText: "coder" }).getAttribute("value"));
  await page.getByRole("link").filter({ hasText: firstLine(env("TOOL_INPUT")) }).first().click();
  await page.getByText(env("TOOL_TEXT")).waitFor();
  await fitsThePhone("chat");
  await shot("phone-dark");
  // A sandbox's page and the admin pages fit too, their actions on screen.
  await page.getByRole("link", { name: "Sandboxes", exact: true }).click();
  // The chat's box is listed apart from the user's own, with a way back to its Session.
  await page.getByRole("table", { name: "Sandboxes of chat Sessions" }).getByRole("link", { name: "its Session" }).first().waitFor();
  await page.getByTestId("sandbox-row").first().waitFor();
  await fitsThePhone("the sandboxes");
  await onScreen(page.getByTestId("sandbox-row").first().getByRole("button", { name: "Delete", exact: true }));
  await shot("phone-sandboxes");
  await page.getByTestId("sandbox-row").first().getByRole("link").first().click();
  await page.getByTestId("sandbox-state").waitFor();
  await fitsThePhone("a sandbox");
  await onScreen(page.getByRole("button", { name: "Delete", exact: true }));
  await shot("phone-sandbox");
  await page.getByRole("link", { name: "Admin", exact: true }).click();
  await page.getByRole("tab", { name: "Runtime profiles" }).click();
  await page.getByTestId("profile-card").first().waitFor();
  await fitsThePhone("the runtime profiles");
  await onScreen(page.getByTestId("profile-card").first().getByRole("button", { name: "Delete", exact: true }));
  await shot("phone-admin");
});

/** Fails unless the page is no wider than the viewport. */
async function fitsThePhone(what) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `${what}: the page is ${overflow}px wider than the phone`);
}

/** Fails unless locator's element lies within the viewport's width. */
async function onScreen(locator) {
  await locator.waitFor();
  const box = await locator.boundingBox();
  const width = page.viewportSize().width;
  assert.ok(box && box.x >= 0 && box.x + box.width <= width + 1, `a button lies off-screen: ${JSON.stringify(box)} in ${width}px`);
}
