// People in the console, in a real headless Chromium: they sign in through
// a real OpenID Connect provider (oidc-provider with its own login and
// consent pages), make API keys, share an Agent, administer users and sign
// out, against the server console_test.go started after e2e/console.test.mjs
// ran on it (Agents coder, careful and vaulted are the bootstrap
// administrator's; RuntimeProfile test has the fake model). It passes:
//
//   CONSOLE_URL, API_KEY    the server and its own key
//   ISSUER                  the identity provider ("Sign in with <its host>")
//   CHROMIUM                the browser executable
//   SCREENSHOT_DIR          where screenshots go
//
// Each person has a browser context of their own (their own cookies); the
// tests run in order, as the people would go about it.
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
const issuerHost = new URL(env("ISSUER")).host;
const timeout = 60_000;
const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };
let browser;

/** People by login: their page and, once signed in, their user id. */
const people = {};

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: env("CHROMIUM"),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
});

/** The page of login's own browser context, made on first use. */
async function pageOf(login) {
  if (people[login]) return people[login].page;
  const context = await browser.newContext({ viewport: desktop, colorScheme: "light" });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (err) => console.log(`# page error (${login}): ${err.message}`));
  people[login] = { page };
  return page;
}

const shot = (page, name) => page.screenshot({ path: join(shots, `${name}.png`) });

async function noOverflow(page, what) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `${what}: the page is ${overflow}px wider than the window`);
}

const signInLink = (page) => page.getByRole("link", { name: `Sign in with ${issuerHost}`, exact: true });

/** Signs login in from the sign-in page through the provider's login and consent pages. */
async function throughProvider(page, login, screenshot) {
  await signInLink(page).click();
  const box = page.locator("input[name=login]");
  await box.waitFor();
  assert.equal(new URL(page.url()).host, issuerHost, "the login page is the provider's");
  await box.fill(login);
  await page.locator("input[name=password]").fill("any password");
  if (screenshot) await shot(page, screenshot);
  await page.locator("button[type=submit]").click();
  await page.getByRole("button", { name: "Continue" }).click(); // the provider's consent page
  await page.getByTestId("user-menu").waitFor();
  assert.equal(new URL(page.url()).host, new URL(url).host, "back at the console");
}

/** Signs login in on a fresh page and notes their user id. */
async function signIn(login) {
  const page = await pageOf(login);
  await page.goto(url);
  await throughProvider(page, login);
  people[login].id = await userId(page);
  return page;
}

/** The signed-in user's id, from their menu. */
async function userId(page) {
  // The menu toggles on click; a re-render right after sign-in (the
  // console settling on its first page) may close it again: open it
  // until it shows.
  for (let i = 0; i < 5; i++) {
    if (!(await page.getByTestId("user-id").isVisible())) await page.getByTestId("user-menu").click();
    if (await page.getByTestId("user-id").waitFor({ timeout: 3000 }).then(() => true, () => false)) break;
  }
  const id = (await page.getByTestId("user-id").textContent()).trim();
  await page.keyboard.press("Escape");
  return id;
}

async function section(page, name) {
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name, exact: true }).click();
}

const agentRow = (page, name) =>
  page.getByTestId("agent-row").filter({ has: page.getByRole("link", { name, exact: true }) });

async function current(headers) {
  const resp = await fetch(`${url}/api/v1/user/current`, { headers });
  return { status: resp.status, body: resp.ok ? await resp.json() : null };
}

test("a failed sign-in reads as a sentence", async () => {
  const page = await pageOf("alice");
  await page.goto(`${url}/?sign_in_error=invalid_token#/agents`);
  await page.getByTestId("signin-notice").filter({ hasText: "answer could not be verified" }).waitFor();
  assert.ok(!page.url().includes("sign_in_error"), `the reason stays in the address: ${page.url()}`);
  assert.ok(page.url().endsWith("/#/agents"), page.url());
  await signInLink(page).waitFor();
  await page.getByLabel("API key", { exact: true }).waitFor(); // the bootstrap administrator's way stays
  await shot(page, "signin-provider");
  await page.setViewportSize(phone);
  await noOverflow(page, "the sign-in page");
  await shot(page, "signin-provider-phone");
  await page.setViewportSize(desktop);
});

test("sign in through the provider's login page", async () => {
  const page = await pageOf("alice");
  await throughProvider(page, "alice", "idp-login");
  // Back where the sign-in started, signed in as a member.
  assert.ok(page.url().endsWith("/#/agents"), `back at ${page.url()}`);
  await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
  const menu = page.getByTestId("user-menu");
  assert.equal(await menu.getAttribute("aria-label"), "Account: Test alice");
  const nav = page.getByRole("navigation", { name: "Sections" });
  assert.equal(await nav.getByRole("link", { name: "Admin", exact: true }).count(), 0, "a member is offered no Admin section");
  await menu.click();
  const panel = page.getByRole("region", { name: "Account" });
  await panel.getByText("alice@example.com").waitFor();
  await panel.getByTestId("user-role").filter({ hasText: "member" }).waitFor();
  await panel.getByText("through the identity provider").waitFor();
  await shot(page, "user-menu");
  people.alice.id = (await panel.getByTestId("user-id").textContent()).trim();
  assert.match(people.alice.id, /^usr_/);
  await page.keyboard.press("Escape");
  assert.equal(await panel.count(), 0, "Escape closes the menu");
  // The session cookie is the server's alone: no script reads it.
  const cookies = await page.evaluate(() => document.cookie);
  assert.ok(!cookies.includes("astrabox_session"), `a script sees the session cookie: ${cookies}`);
  // The bootstrap administrator's Agents are private: a new member sees none.
  await page.getByText("No agents", { exact: true }).waitFor();
});

test("make an API key, shown once, and revoke another", async () => {
  const page = await pageOf("alice");
  await page.getByTestId("user-menu").click();
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
  await page.getByText("No API keys").waitFor();

  const make = async (name, scopes, expires) => {
    await page.getByRole("button", { name: "New API key" }).click();
    const form = page.getByRole("form", { name: "New API key" });
    await form.getByLabel("Name", { exact: true }).fill(name);
    for (const s of ["read", "write"]) await form.getByRole("checkbox", { name: new RegExp(`^${s}`) }).setChecked(scopes.includes(s));
    await form.getByLabel("Expires after").selectOption({ label: expires });
    await form.getByRole("button", { name: "Create key" }).click();
    const text = (await page.getByTestId("new-key").textContent()).trim();
    assert.match(text, /^abx_/);
    return text;
  };

  const key = await make("laptop", ["read"], "30 days");
  const card = page.getByTestId("new-key-card");
  await card.getByText("it is not shown again").waitFor();
  await card.getByRole("button", { name: "Copy key" }).click();
  await card.getByRole("button", { name: "Copied" }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key, "the copy button copies the key");
  await shot(page, "api-key-made");
  // The key works, as alice, with the scopes asked for.
  const me = await current({ "OPEN-SANDBOX-API-KEY": key });
  assert.equal(me.status, 200);
  assert.equal(me.body.user.user_id, people.alice.id);
  assert.deepEqual(me.body.scopes, ["read"]);
  await card.getByRole("button", { name: "Done" }).click();
  assert.ok(!(await page.content()).includes(key), "the key is still in the page after Done");
  const row = page.getByTestId("key-row").filter({ hasText: "laptop" });
  await row.getByText("active").waitFor();
  await row.getByText("in 30 days").waitFor();

  // Revoking stops a key at once.
  const old = await make("old", ["read", "write"], "7 days");
  await page.getByTestId("new-key-card").getByRole("button", { name: "Done" }).click();
  assert.equal((await current({ "OPEN-SANDBOX-API-KEY": old })).status, 200);
  const oldRow = page.getByTestId("key-row").filter({ hasText: "old" });
  page.once("dialog", (d) => d.accept());
  await oldRow.getByRole("button", { name: "Revoke" }).click();
  await oldRow.getByText("revoked").waitFor();
  assert.equal((await current({ "OPEN-SANDBOX-API-KEY": old })).status, 401, "a revoked key still works");
  await page.reload();
  await page.getByTestId("key-row").filter({ hasText: "laptop" }).waitFor();
  assert.ok(!(await page.content()).includes(key), "the key came back after a reload");
  await shot(page, "api-keys");
  await page.setViewportSize(phone);
  await noOverflow(page, "the API keys page");
  await shot(page, "api-keys-phone");
  await page.setViewportSize(desktop);
});

test("share an agent with another person, then make them its admin", async () => {
  const bob = await signIn("bob");
  await section(bob, "Agents");
  await bob.getByText("No agents", { exact: true }).waitFor();

  const alice = await pageOf("alice");
  await section(alice, "Agents");
  await alice.getByRole("button", { name: "New agent" }).click();
  const form = alice.getByRole("form", { name: "New agent" });
  await form.getByLabel("Name", { exact: true }).fill("alice-bot");
  await form.getByRole("combobox", { name: /^Runtime profile/ }).selectOption("test");
  await form.getByLabel("Model", { exact: true }).fill("fake-1");
  assert.equal(await form.getByRole("group", { name: "Vaults" }).count(), 0, "a member is offered vaults");
  await form.getByRole("radio", { name: /^Shared/ }).check();
  const sharedWith = form.getByRole("group", { name: "Shared with" });
  await sharedWith.getByLabel("Shared with (user id)").fill(people.bob.id);
  await sharedWith.getByRole("button", { name: "Add" }).click();
  await sharedWith.locator(".chip").filter({ hasText: people.bob.id }).waitFor();
  await shot(alice, "agent-sharing");
  await form.getByRole("button", { name: "Save" }).click();
  const row = agentRow(alice, "alice-bot");
  await row.getByText("shared · 1").waitFor();
  await row.getByRole("cell", { name: "you", exact: true }).waitFor();

  // bob sees it, and may chat with it, but not change it.
  await bob.reload();
  const bobRow = agentRow(bob, "alice-bot");
  await bobRow.waitFor();
  assert.equal(await bobRow.getByRole("button", { name: "Edit" }).count(), 0, "bob may edit alice's agent");
  assert.equal(await bob.getByTestId("agent-row").count(), 1, "bob sees other agents than the one shared with him");

  // Made one of its admins, he may.
  await row.getByRole("button", { name: "Edit" }).click();
  const edit = alice.getByRole("form", { name: "Edit alice-bot" });
  assert.ok(await edit.getByRole("radio", { name: /^Shared/ }).isChecked());
  await edit.getByRole("group", { name: "Shared with" }).locator(".chip").filter({ hasText: people.bob.id }).waitFor();
  await edit.getByLabel("Agent admins (user id)").fill(people.bob.id);
  await edit.getByRole("button", { name: "Save" }).click(); // typed and not added: saved all the same
  await alice.getByRole("form", { name: "Edit alice-bot" }).waitFor({ state: "detached" });
  await bob.reload();
  await agentRow(bob, "alice-bot").getByRole("button", { name: "Edit" }).waitFor();
});

test("a member's sandbox: its terminal and files through the proxy, signed in by cookie", async () => {
  const page = await pageOf("alice");
  await section(page, "Sandboxes");
  await page.getByRole("heading", { name: "Sandboxes", exact: true }).waitFor();
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await page.getByTestId("sandbox-state").filter({ hasText: "Running" }).waitFor();
  await page.getByTestId("terminal-status").filter({ hasText: "Connected" }).waitFor();
  await page.getByTestId("terminal").click();
  await page.keyboard.type("echo member-$((6*7))\n");
  await page.locator(".xterm-rows").getByText("member-42").waitFor();
  await page.getByRole("tab", { name: "Files" }).click();
  await page.getByTestId("upload-input").setInputFiles({ name: "alice.txt", mimeType: "text/plain", buffer: Buffer.from("from alice\n") });
  await page.getByRole("status").filter({ hasText: "Uploaded alice.txt" }).waitFor();
  await page.getByRole("button", { name: "alice.txt", exact: true }).click();
  await page.getByTestId("file-content").filter({ hasText: "from alice" }).waitFor();
  const id = (await page.getByRole("heading", { level: 1 }).textContent()).trim();
  // Her list holds her box alone (the administrator's are not hers).
  await page.getByRole("link", { name: "← Sandboxes" }).click();
  await page.getByTestId("sandbox-row").first().waitFor();
  assert.equal(await page.getByTestId("sandbox-row").count(), 1, "alice sees others' sandboxes");
  const row = page.getByTestId("sandbox-row").filter({ has: page.getByTitle(id, { exact: true }) });
  page.once("dialog", (d) => d.accept());
  await row.getByRole("button", { name: "Delete", exact: true }).click();
  await row.waitFor({ state: "detached" });
});

test("an administrator manages users", async () => {
  const page = await signIn("admin-ann");
  await section(page, "Admin");
  const tab = page.getByRole("tab", { name: "Users" });
  assert.equal(await tab.getAttribute("aria-selected"), "true", "Admin opens on Users");
  const rowOf = (text) => page.getByTestId("user-row").filter({ hasText: text });
  for (const who of ["Test alice", "Test bob", "Test admin-ann", "admin"]) await rowOf(who).first().waitFor();
  await rowOf("Test admin-ann").getByText("(you)").waitFor();
  assert.ok(await rowOf("Test admin-ann").getByRole("combobox").isDisabled(), "an administrator may change their own role");
  await shot(page, "admin-users");

  // bob reads only from now on.
  await page.getByLabel("Role of Test bob").selectOption("viewer");
  await page.waitForFunction(() => {
    const s = document.querySelector('select[aria-label="Role of Test bob"]');
    return s && s.value === "viewer" && !s.disabled;
  });

  // A service user for a CI job, with a key.
  await page.getByRole("button", { name: "Add service user" }).click();
  const form = page.getByRole("form", { name: "New service user" });
  await form.getByLabel("User id").fill("ci-bot");
  await form.getByLabel("Display name").fill("CI bot");
  await form.getByRole("button", { name: "Add user" }).click();
  const keys = page.getByRole("region", { name: "Keys of CI bot" });
  await keys.getByText("No API keys").waitFor();
  await keys.getByRole("button", { name: "New API key" }).click();
  await keys.getByLabel("Name", { exact: true }).fill("deploy");
  await keys.getByRole("button", { name: "Create key" }).click();
  const key = (await keys.getByTestId("new-key").textContent()).trim();
  const me = await current({ "OPEN-SANDBOX-API-KEY": key });
  assert.equal(me.body?.user?.user_id, "ci-bot");
  await shot(page, "admin-user-key");
  await keys.getByRole("button", { name: "Done" }).click();

  // Disabled, its key stops; enabled, it works again.
  page.once("dialog", (d) => d.accept());
  await rowOf("CI bot").getByRole("button", { name: "Disable" }).click();
  await rowOf("CI bot").getByText("disabled").waitFor();
  assert.equal((await current({ "OPEN-SANDBOX-API-KEY": key })).status, 401);
  await rowOf("CI bot").getByRole("button", { name: "Enable" }).click();
  await rowOf("CI bot").getByText("active").waitFor();
  assert.equal((await current({ "OPEN-SANDBOX-API-KEY": key })).status, 200);

  // The audit log has it all.
  await page.getByRole("tab", { name: "Audit log" }).click();
  await page.getByTestId("audit-row").filter({ hasText: "user.set_role" }).first().waitFor();
  await page.getByTestId("audit-row").filter({ hasText: "api_key.create" }).first().waitFor();
  await shot(page, "admin-audit");

  await page.getByRole("tab", { name: "Users" }).click();
  await page.setViewportSize(phone);
  await rowOf("CI bot").waitFor();
  await noOverflow(page, "the Users page");
  await shot(page, "admin-users-phone");
  await page.setViewportSize(desktop);
});

test("a viewer is offered nothing that writes", async () => {
  const page = await pageOf("bob");
  await page.reload();
  await page.getByTestId("user-menu").click();
  await page.getByTestId("user-role").filter({ hasText: "viewer" }).waitFor();
  await page.keyboard.press("Escape");
  await section(page, "Agents");
  const row = agentRow(page, "alice-bot");
  await row.waitFor();
  assert.equal(await page.getByRole("button", { name: "New agent" }).count(), 0);
  assert.equal(await row.getByRole("button", { name: "Edit" }).count(), 0, "a viewer is offered Edit (though an agent admin)");
  await shot(page, "viewer-agents");
  await section(page, "Chat");
  await page.getByLabel("Agent", { exact: true }).waitFor();
  await page.getByText("Your role reads only.").waitFor();
  assert.equal(await page.getByRole("button", { name: "New session" }).count(), 0);
  await section(page, "Sandboxes");
  await page.getByText("You have none.").waitFor();
  assert.equal(await page.getByRole("button", { name: "Create sandbox" }).count(), 0);
  await page.getByTestId("user-menu").click();
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByText("Your role reads only").waitFor();
  assert.equal(await page.getByRole("button", { name: "New API key" }).count(), 0);
});

test("sign out", async () => {
  const page = await pageOf("alice");
  await page.emulateMedia({ colorScheme: "dark" });
  await page.setViewportSize(phone);
  await page.getByTestId("user-menu").click();
  await page.getByRole("region", { name: "Account" }).getByText("alice@example.com").waitFor();
  await noOverflow(page, "the open user menu");
  await shot(page, "user-menu-phone-dark");
  await page.getByRole("button", { name: "Sign out" }).click();
  await signInLink(page).waitFor();
  await page.reload();
  await signInLink(page).waitFor();
  const status = await page.evaluate(async () => (await fetch("/api/v1/user/current")).status);
  assert.equal(status, 401, "the session still works after signing out");
  await shot(page, "signed-out-phone-dark");
});
