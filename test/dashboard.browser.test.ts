import { type DashboardAccess, dashboardHandler, nodeListener } from "@connector-store/dashboard"
import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { createServer, type Server } from "node:http"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CHROMIUM_LAUNCH, chromiumAvailable } from "./support/chromium.js"
import { DASHBOARD_ROWS, HOSTILE, SECRET_LEASE, seedDashboardRows } from "./support/dashboard.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The dashboard as an operator uses it, in headless Chromium, on a real SQLite file and a real Postgres with rows the
// store wrote: the overview, a filtered list, an operation's story, an action confirmed and its row changed, read-only and
// forbidden users refused on the server (also by requests that skip the page), hostile text inert, a stale page refused.

let browser: Browser
beforeAll(async () => {
  if (chromiumAvailable) browser = await chromium.launch(CHROMIUM_LAUNCH)
}, 30_000)
afterAll(async () => {
  await browser?.close()
})

const backends: ReadonlyArray<readonly [string, boolean, () => Promise<{ url: string; tablePrefix?: string }>]> = [
  ["sqlite", true, async () => ({ url: freshSqlitePath() })],
  ["postgres", pgAvailable, async () => ({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() })]
]

for (const [backend, available, connection] of backends) {
  describe.skipIf(!chromiumAvailable || !available)(`the dashboard in Chromium on ${backend}`, () => {
    let store: SqlConnectorStore
    let server: Server
    let base: string

    beforeAll(async () => {
      store = await openConnectorStore(await connection())
      await seedDashboardRows(store, Date.now())
      // The test's stand-in for a login: a header names the role (none: admin).
      const handler = dashboardHandler({
        store,
        basePath: "/ops",
        actions: true,
        refreshMs: 60_000,
        authorize: (request) => (request.headers.get("x-test-role") as DashboardAccess | null) ?? "admin",
        actorOf: (request) => request.headers.get("x-test-user") ?? "ada"
      })
      server = createServer(nodeListener(handler))
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const address = server.address()
      base = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/ops`
    }, 30_000)
    afterAll(async () => {
      server?.closeAllConnections()
      await new Promise((resolve) => server?.close(resolve))
      await store?.close()
    })

    const open = async (role?: DashboardAccess): Promise<Page> => {
      const context = await browser.newContext(role === undefined ? {} : { extraHTTPHeaders: { "x-test-role": role } })
      return context.newPage()
    }
    const opLink = (key: { callerDID: string; operationID: string }) =>
      `${base}/operation?caller=${encodeURIComponent(key.callerDID)}&id=${encodeURIComponent(key.operationID)}`

    it("opens the overview with the counts by state and what needs a person", async () => {
      const page = await open()
      await page.goto(`${base}/`)
      expect(await page.locator("h1").textContent()).toBe("Overview")
      const needs = page.locator("[data-count=needs-person]")
      expect(await needs.locator("li", { hasText: "dead" }).locator("strong").textContent()).toBe("2")
      expect(await needs.locator("li", { hasText: "repair_failed" }).locator("strong").textContent()).toBe("1")
      await page.context().close()
    })

    it("filters a list by state tab and owner, a keyset page at a time", async () => {
      const page = await open()
      await page.goto(`${base}/operations`)
      expect(await page.locator("table[data-list=operations] tbody tr").count()).toBe(50)
      await page.click("a[rel=next]")
      expect(await page.locator("table[data-list=operations] tbody tr").count()).toBe(14)
      await page.goto(`${base}/operations`)
      await page.click(".tabs a:text-is('dead')")
      expect(await page.locator("table[data-list=operations] tbody tr").count()).toBe(2)
      await page.fill("input[name=owner]", "did:owner:2")
      await page.click("form.filters button[type=submit]")
      const rows = page.locator("table[data-list=operations] tbody tr")
      expect(await rows.count()).toBe(1)
      expect(await rows.first().textContent()).toContain("op-dead-2")
      await page.context().close()
    })

    it("opens an operation's story from the list; its lease token is never on the page", async () => {
      const page = await open()
      await page.goto(`${base}/operations?state=attempted`)
      await page.locator("table[data-list=operations] a").first().click()
      expect(await page.locator("h1").textContent()).toContain("did:caller:1 / op-")
      const story = await page.locator("ol.timeline").textContent()
      expect(story).toContain("claimed")
      expect(story).toContain("leased to runner incarnation inc-1")
      expect(await page.content()).not.toContain(SECRET_LEASE)
      await page.context().close()
    })

    it("renders hostile ids, errors and payloads as inert text", async () => {
      const page = await open()
      const dialogs: Array<string> = []
      page.on("dialog", (dialog) => {
        dialogs.push(dialog.message())
        void dialog.dismiss()
      })
      await page.goto(opLink(DASHBOARD_ROWS.hostile))
      expect(await page.locator("h1").textContent()).toContain(HOSTILE)
      expect(await page.locator("dl.fields").textContent()).toContain(HOSTILE)
      expect(await page.locator("pre").last().textContent()).toContain(HOSTILE.replaceAll("\"", "\\\""))
      await page.goto(`${base}/sync`)
      expect(await page.locator("table[data-list=sync]").textContent()).toContain(HOSTILE)
      expect(await page.evaluate(() => (globalThis as { __pwned?: unknown }).__pwned)).toBeUndefined()
      expect(await page.locator("img[src=x]").count()).toBe(0)
      expect(dialogs).toEqual([])
      await page.context().close()
    })

    it("runs an action after its confirmation, shows the store's answer, changes the row and records it", async () => {
      const page = await open()
      await page.goto(opLink(DASHBOARD_ROWS.dead))
      await page.click("button[data-action=retry]")
      expect(await page.locator("[data-dry-run]").getAttribute("data-dry-run")).toBe("1")
      expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
      await page.click("#confirm")
      expect(await page.locator("[data-outcome]").getAttribute("data-outcome")).toBe("done")
      await page.click("#back")
      expect(await page.locator("h1 + p .badge").first().textContent()).toBe("attempted")
      expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("attempted")
      await page.goto(`${base}/audit`)
      const entry = page.locator("table[data-list=audit] tbody tr").first()
      expect(await entry.textContent()).toContain("retryOperation")
      expect(await entry.textContent()).toContain("did:caller:1/op-dead")
      await page.context().close()
    })

    it("refuses a stale page's action with the store's reason", async () => {
      const page = await open()
      await page.goto(opLink(DASHBOARD_ROWS.dead2))
      await page.click("button[data-action=retry]")
      // Someone else retries it first, by the store's own call.
      await store.retryOperation(DASHBOARD_ROWS.dead2)
      await page.click("#confirm")
      expect(await page.locator("[data-outcome]").getAttribute("data-outcome")).toBe("refused")
      expect(await page.locator("[data-answer=refused]").textContent()).toContain("it is attempted; only dead operations are retried")
      await page.context().close()
    })

    it("refuses read-only and forbidden users on the server, also a hand-made request that skips the page", async () => {
      const reader = await open("read-only")
      await reader.goto(`${base}/operations?state=reconcile_only`)
      expect(await reader.locator("table[data-list=operations] tbody tr").count()).toBe(1)
      expect(await reader.locator("button[data-action]").count()).toBe(0)
      const target = JSON.stringify([DASHBOARD_ROWS.unsettled.callerDID, DASHBOARD_ROWS.unsettled.operationID])
      const byFetch = await reader.evaluate(async ([url, target]) => {
        const answer = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ target, confirm: "yes" }).toString()
        })
        return answer.status
      }, [`${base}/actions/give-up`, target] as const)
      expect(byFetch).toBe(403)
      // Even with this browser's own token and origin, as a page of the dashboard would send it.
      const token = (await reader.context().cookies()).find((cookie) => cookie.name.includes("csrf"))!.value
      const withToken = await reader.request.post(`${base}/actions/give-up`, {
        form: { csrf: token, target, confirm: "yes" },
        headers: { origin: new URL(base).origin }
      })
      expect(withToken.status()).toBe(403)
      expect(await withToken.text()).toContain("read-only")
      await reader.context().close()

      const stranger = await open("forbidden")
      expect((await stranger.goto(`${base}/`))!.status()).toBe(403)
      expect((await stranger.goto(`${base}/assets/dashboard.js`))!.status()).toBe(403)
      expect((await stranger.goto(opLink(DASHBOARD_ROWS.unsettled)))!.status()).toBe(403)
      await stranger.context().close()

      // An admin's browser, but a request that did not come from the page: no token, so no action.
      const admin = await open()
      await admin.goto(`${base}/`)
      const forged = await admin.request.post(`${base}/actions/give-up`, { form: { target, confirm: "yes" } })
      expect(forged.status()).toBe(403)
      await admin.context().close()
      expect((await store.getOperation(DASHBOARD_ROWS.unsettled))!.state).toBe("reconcile_only")
    })

    it("refreshes live while visible, stops while hidden, and refreshes on the control", async () => {
      const page = await open()
      await page.goto(`${base}/`)
      const running = () => page.evaluate(() => (globalThis as unknown as { __dashboard: { running(): boolean } }).__dashboard.running())
      // As the browser reports a tab in the background: document.hidden, then a visibilitychange event.
      const setHidden = (hidden: boolean) =>
        page.evaluate((value) => {
          const doc = (globalThis as unknown as { document: EventTarget }).document
          Object.defineProperty(doc, "hidden", { value, configurable: true })
          doc.dispatchEvent(new Event("visibilitychange"))
        }, hidden)
      expect(await running()).toBe(true)
      await setHidden(true)
      expect(await running()).toBe(false)
      await setHidden(false)
      expect(await running()).toBe(true)
      const before = await page.evaluate(() => (globalThis as unknown as { __dashboard: { refreshes: number } }).__dashboard.refreshes)
      await page.click("#refresh")
      await page.waitForFunction((n) => (globalThis as unknown as { __dashboard: { refreshes: number } }).__dashboard.refreshes > n, before)
      expect(await page.locator("h1").textContent()).toBe("Overview")
      await page.context().close()
    })
  })
}
