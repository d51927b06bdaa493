// Drives the page of `agent-controller serve` in Debian's chromium, headless, through
// playwright-core (tests/it/serve_page.rs starts the server and runs this; it checks the
// sessions with the CLI afterwards). Takes, from the environment:
//   SERVE_URL      the server's base URL (http://127.0.0.1:PORT)
//   SERVE_TOKEN    its token
//   ARTIFACTS      where the screenshots go (target/browser-artifacts)
//   PLAN_TITLE     the title of the plan to approve at desktop size
//   HOSTILE_TITLE  the title of the hostile plan (the text as `shown` writes it), rejected at
//                  phone size with feedback
//   QUESTION       the question to answer at phone size, and ANSWER the option to choose
//   UNREADABLE     the session id of the one stored record that cannot be read
// Exits non-zero, saying what went wrong, when the page does not behave.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const base = env("SERVE_URL");
const token = env("SERVE_TOKEN");
const artifacts = env("ARTIFACTS");
const planTitle = env("PLAN_TITLE");
const hostileTitle = env("HOSTILE_TITLE");
const question = env("QUESTION");
const answer = env("ANSWER");
const unreadable = env("UNREADABLE");
mkdirSync(artifacts, { recursive: true });

const WAIT = 20_000;
const step = (text) => console.log(`step: ${text}`);
function check(condition, what) {
  if (!condition) throw new Error(`the page is wrong: ${what}`);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
try {
  await desktop();
  await phone();
} finally {
  await browser.close();
}
console.log("done");

/** A page of the server with the token entered; every page error and dialog fails the test. */
async function openPage(context, name) {
  const page = await context.newPage();
  page.on("pageerror", (error) => {
    console.error(`${name}: page error: ${error.message}`);
    process.exitCode = 1;
  });
  page.on("dialog", (dialog) => {
    console.error(`${name}: a dialog opened (script ran?): ${dialog.message()}`);
    process.exitCode = 1;
    dialog.dismiss();
  });
  const response = await page.goto(base + "/");
  const headers = response.headers();
  check(headers["content-security-policy"]?.includes("script-src 'self'"), "no CSP on the page");
  check(headers["x-content-type-options"] === "nosniff", "no nosniff on the page");
  check(!("access-control-allow-origin" in headers), "a CORS header on the page");
  await page.locator("#token").waitFor({ state: "visible", timeout: WAIT });
  return page;
}

async function enterToken(page) {
  await page.fill("#token", token);
  await page.click("#login button[type=submit]");
  await page.locator("#login").waitFor({ state: "hidden", timeout: WAIT });
}

/** The card whose title is `title` (as shown). */
function cardTitled(page, title) {
  return page.locator("li.card").filter({ has: page.locator("h2.title", { hasText: title }) });
}

async function desktop() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await openPage(context, "desktop");
  await page.screenshot({ path: join(artifacts, "desktop-1-token.png"), fullPage: true });

  step("a wrong token is refused and asked again");
  await page.fill("#token", "not-the-token-0000000000");
  await page.click("#login button[type=submit]");
  await page.locator("#login-error", { hasText: "refused" }).waitFor({ timeout: WAIT });

  step("the token opens the list; the plan shows its title and text");
  await enterToken(page);
  const plan = cardTitled(page, planTitle);
  await plan.waitFor({ timeout: WAIT });
  const lines = await plan.locator("ol.lines code").allTextContents();
  check(lines[0] === `# ${planTitle}`, `the plan's first line is its title: ${JSON.stringify(lines[0])}`);
  check(lines.includes("2. Make the change in small steps."), `the plan's text: ${JSON.stringify(lines)}`);
  const sha = await plan.locator(".sha256").textContent();
  check(/^sha256 [0-9a-f]{64}$/.test(sha), `the sha256 shown: ${sha}`);

  step("the record that cannot be read is shown: how many, its session and why");
  const unread = page.locator("#unreadable");
  await unread.waitFor({ state: "visible", timeout: WAIT });
  const unreadText = await unread.textContent();
  check(unreadText.includes("1 stored record cannot be read"), `the count: ${unreadText}`);
  check(unreadText.includes(`session ${unreadable}`), `its session: ${unreadText}`);
  check(unreadText.includes("garbage.pending.json"), `where it is: ${unreadText}`);
  check((await unread.locator("li").count()) === 1, `one record listed: ${unreadText}`);

  step("the hostile plan shows every character and runs nothing");
  const hostile = cardTitled(page, hostileTitle);
  await hostile.waitFor({ timeout: WAIT });
  const hostileText = await hostile.textContent();
  for (const visible of ["<script>", "\\u{202e}", "\\u{200b}", "\\u{1b}"]) {
    check(hostileText.includes(visible), `the hostile plan shows ${visible}: ${hostileText}`);
  }
  const body = await page.evaluate(() => document.body.textContent);
  for (const hidden of ["\u202e", "\u200b", "\u001b"]) {
    check(!body.includes(hidden), `a raw U+${hidden.codePointAt(0).toString(16)} reached the page`);
  }
  check((await page.evaluate(() => window.__pwned)) === undefined, "the plan's script ran");
  check((await page.locator("main script, main img, main iframe").count()) === 0, "the plan made elements");
  check((await hostile.locator(".escape").count()) >= 3, "the escapes are not marked");
  await page.screenshot({ path: join(artifacts, "desktop-2-pending.png"), fullPage: true });

  step("a second page sees the plan, and sees it go when the first approves it");
  const other = await openPage(context, "second page");
  await enterToken(other);
  await cardTitled(other, planTitle).waitFor({ timeout: WAIT });
  // The second page's stream is open before the decision is taken.
  await other.locator("#status", { hasText: "Live" }).waitFor({ timeout: WAIT });

  step("Approve");
  await plan.locator("button.approve").click();
  await plan.waitFor({ state: "detached", timeout: WAIT });
  await page.locator("#status", { hasText: "approved" }).waitFor({ timeout: WAIT });
  await page.screenshot({ path: join(artifacts, "desktop-3-approved.png"), fullPage: true });
  await cardTitled(other, planTitle).waitFor({ state: "detached", timeout: WAIT });
  await other.screenshot({ path: join(artifacts, "desktop-4-second-page.png"), fullPage: true });
  await context.close();
}

async function phone() {
  const context = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  const page = await openPage(context, "phone");
  await enterToken(page);
  const hostile = cardTitled(page, hostileTitle);
  await hostile.waitFor({ timeout: WAIT });
  await page.screenshot({ path: join(artifacts, "phone-1-pending.png"), fullPage: true });
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  check(width <= 390, `the page is wider than the phone: ${width}px`);

  step("reject the hostile plan with feedback and a comment on line 1");
  await hostile.locator("ol.lines li").first().locator("button.comment-on").click();
  await hostile.locator(".comments-given input").fill("no scripts in titles");
  await hostile.locator("textarea.feedback").fill("too risky");
  await page.screenshot({ path: join(artifacts, "phone-2-rejecting.png"), fullPage: true });
  const firstSha = await hostile.locator(".sha256").textContent();
  await hostile.locator("button.reject").click();
  await page.locator("#status", { hasText: "rejected" }).waitFor({ timeout: WAIT });

  step("the revision comes back with its diff and the comment");
  const revised = page.locator("li.card", { hasText: "Addressed: too risky" });
  await revised.waitFor({ timeout: WAIT });
  check((await revised.locator(".sha256").textContent()) !== firstSha, "the revision has the old sha256");
  await revised.locator("pre.diff", { hasText: "+- Addressed: too risky" }).waitFor({ timeout: WAIT });
  await revised.locator("ul.comments", { hasText: "no scripts in titles" }).waitFor({ timeout: WAIT });
  await page.screenshot({ path: join(artifacts, "phone-3-revised.png"), fullPage: true });

  step("answer the question");
  const asked = page.locator("li.card", { has: page.locator(".question", { hasText: question }) });
  await asked.waitFor({ timeout: WAIT });
  await asked.locator("label.choice", { hasText: answer }).locator("input").check();
  await page.screenshot({ path: join(artifacts, "phone-4-answering.png"), fullPage: true });
  await asked.locator("button.answer").click();
  await asked.waitFor({ state: "detached", timeout: WAIT });
  await page.screenshot({ path: join(artifacts, "phone-5-answered.png"), fullPage: true });
  await context.close();
}
