#!/usr/bin/env node
// The screenshots of docs/dashboard.md, taken in Debian's Chromium through playwright-core (never a downloaded browser):
// a simulation writes a SQLite store while the overview is read every half second (so its chart has readings), then the
// main pages are shot. Run after `npm run build`:
//
//   node packages/dashboard/scripts/screenshots.mjs        # writes docs/dashboard-*.png
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { dashboardHandler, nodeListener } from "@connector-store/dashboard"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const dir = mkdtempSync(join(tmpdir(), "dashboard-shots-"))
const file = join(dir, "demo.sqlite")
const sleep = (ms) => new Promise((done) => setTimeout(done, ms))

const simulation = spawn(process.execPath, [join(root, "packages/cli/bin/connector-store.js"), "simulate", "--file", file, "--operations", "400", "--seed", "11", "--keep"], { stdio: "ignore" })
const ended = new Promise((done) => simulation.on("exit", done))
let store
for (let i = 0; i < 100 && store === undefined; i++) {
  await sleep(200)
  if (existsSync(file)) store = await openConnectorStore({ url: file }).catch(() => undefined)
}
if (store === undefined) throw new Error("the simulation's store never opened")

const handler = dashboardHandler({ store, actions: true, basePath: "/ops", statusTtlMs: 0, refreshMs: 5000, actorOf: () => "ada@example.com" })
let running = true
void ended.then(() => {
  running = false
})
// Each overview reading is one point of its chart.
while (running) {
  await handler(new Request("http://localhost/ops/"))
  await sleep(400)
}
const server = createServer(nodeListener(handler))
await new Promise((done) => server.listen(0, "127.0.0.1", done))
const base = `http://127.0.0.1:${server.address().port}/ops`

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--headless", "--disable-gpu"] })
const page = await browser.newPage({ viewport: { width: 1280, height: 860 }, colorScheme: "light" })
const shot = async (name, full = false) => {
  await page.screenshot({ path: join(root, "docs", `dashboard-${name}.png`), fullPage: full })
  console.log(`docs/dashboard-${name}.png`)
}
await page.goto(`${base}/`)
await shot("overview")
await page.goto(`${base}/operations?state=dead`)
await shot("operations")
await page.goto(`${base}/operations?state=reconcile_only`)
await page.locator("table[data-list=operations] a").first().click()
await shot("operation", true)
await page.goto(`${base}/operations?state=dead`)
await page.click("button[data-bulk=retry]")
await shot("confirm")
await page.click("#confirm")
await page.goto(`${base}/audit`)
await shot("audit")
await browser.close()
server.close()
await store.close()
rmSync(dir, { recursive: true, force: true })
