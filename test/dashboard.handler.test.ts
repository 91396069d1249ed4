import { type DashboardAccess, dashboardHandler } from "@connector-store/dashboard"
import { OperationRepository } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { Effect } from "effect"
import { operationRow } from "./support/contract/fixtures.js"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { DASHBOARD_ROWS, HOSTILE, SECRET_LEASE, seedDashboardRows } from "./support/dashboard.js"

// The handler's server side without a browser: access on every request, the cross-site guard of every action, the
// confirmation before a write, the store's answer and the audit entry after it, and every stored text escaped.

const ORIGIN = "http://dash.test"
const NOW = Date.now()

let store: ReturnType<typeof openMemoryConnectorStore>
beforeEach(async () => {
  store = openMemoryConnectorStore()
  await seedDashboardRows(store, NOW)
})
afterEach(() => store.close())

const handlerFor = (access: DashboardAccess, actions = true) =>
  dashboardHandler({ store, actions, basePath: "/ops", authorize: () => access, actorOf: () => "ada", refreshMs: 0 })

const get = (handler: ReturnType<typeof dashboardHandler>, path: string, cookie?: string) =>
  handler(new Request(`${ORIGIN}/ops${path}`, { headers: cookie === undefined ? {} : { cookie } }))

/** The CSRF cookie a first page view sets, as the browser would send it back. */
const session = async (handler: ReturnType<typeof dashboardHandler>) => {
  const page = await get(handler, "/")
  const cookie = page.headers.get("set-cookie")!.split(";")[0]!
  return { cookie, token: cookie.split("=")[1]! }
}

const post = (
  handler: ReturnType<typeof dashboardHandler>,
  path: string,
  fields: ReadonlyArray<readonly [string, string]>,
  headers: Record<string, string> = {}
) =>
  handler(new Request(`${ORIGIN}/ops${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...headers },
    body: new URLSearchParams(fields.map(([k, v]): [string, string] => [k, v])).toString()
  }))

const deadTarget = JSON.stringify([DASHBOARD_ROWS.dead.callerDID, DASHBOARD_ROWS.dead.operationID])

describe("the dashboard handler", () => {
  it("refuses a forbidden request everywhere: pages, assets, details and actions", async () => {
    const handler = handlerFor("forbidden")
    for (const path of ["/", "/operations", "/assets/dashboard.js", "/operation?caller=did:caller:1&id=op-dead", "/audit"]) {
      expect((await get(handler, path)).status, path).toBe(403)
    }
    expect((await post(handler, "/actions/retry", [["target", deadTarget], ["confirm", "yes"]])).status).toBe(403)
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
  })

  it("answers 404 outside its mount point", async () => {
    expect((await handlerFor("admin")(new Request(`${ORIGIN}/other`))).status).toBe(404)
  })

  it("lets a read-only request look but not act, even with a valid token", async () => {
    const handler = handlerFor("read-only")
    const { cookie, token } = await session(handler)
    const page = await (await get(handler, "/operations?state=dead", cookie)).text()
    expect(page).toContain("op-dead")
    expect(page).not.toContain("data-action=\"retry\"")
    const refused = await post(handler, "/actions/retry", [["csrf", token], ["target", deadTarget], ["confirm", "yes"]], { cookie })
    expect(refused.status).toBe(403)
    expect(await refused.text()).toContain("read-only")
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
  })

  it("lets no one act while actions are off", async () => {
    const handler = handlerFor("admin", false)
    const { cookie, token } = await session(handler)
    const refused = await post(handler, "/actions/retry", [["csrf", token], ["target", deadTarget], ["confirm", "yes"]], { cookie })
    expect(refused.status).toBe(403)
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
  })

  it("refuses an action without this browser's token, from another origin, or not as a form", async () => {
    const handler = handlerFor("admin")
    const { cookie, token } = await session(handler)
    const fields = [["target", deadTarget], ["confirm", "yes"]] as const
    const tries = [
      post(handler, "/actions/retry", [["csrf", token], ...fields]),
      post(handler, "/actions/retry", [["csrf", "x".repeat(32)], ...fields], { cookie }),
      post(handler, "/actions/retry", [...fields], { cookie }),
      post(handler, "/actions/retry", [["csrf", token], ...fields], { cookie, origin: "http://evil.test" }),
      post(handler, "/actions/retry", [["csrf", token], ...fields], { cookie, origin: ORIGIN, "sec-fetch-site": "cross-site" }),
      post(handler, "/actions/retry", [["csrf", token], ...fields], { cookie, "content-type": "text/plain" })
    ]
    for (const answer of await Promise.all(tries)) expect([403, 415]).toContain(answer.status)
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
    expect((await store.listOperatorActions()).items).toEqual([])
  })

  it("confirms before it writes, then acts through the store's guard and records the action in the audit log", async () => {
    const handler = handlerFor("admin")
    const { cookie, token } = await session(handler)
    const confirmation = await (await post(handler, "/actions/retry", [["csrf", token], ["target", deadTarget]], { cookie })).text()
    expect(confirmation).toContain("data-dry-run=\"1\"")
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("dead")
    const done = await (await post(handler, "/actions/retry", [["csrf", token], ["target", deadTarget], ["confirm", "yes"]], { cookie })).text()
    expect(done).toContain("data-outcome=\"done\"")
    expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("attempted")
    const [entry] = (await store.listOperatorActions()).items
    expect(entry).toMatchObject({ actor: "ada", action: "retryOperation", targets: ["did:caller:1/op-dead"], outcome: "done" })
    // The same confirmed form again is a stale page: the store refuses it with its reason, and that is recorded too.
    const stale = await (await post(handler, "/actions/retry", [["csrf", token], ["target", deadTarget], ["confirm", "yes"]], { cookie })).text()
    expect(stale).toContain("data-outcome=\"refused\"")
    expect(stale).toContain("only dead operations are retried")
    expect((await store.listOperatorActions()).items.map((item) => item.outcome)).toEqual(["refused", "done"])
    expect(await (await get(handler, "/audit", cookie)).text()).toContain("only dead operations are retried")
  })

  it("counts a whole filter's rows first, then acts on exactly those", async () => {
    const handler = handlerFor("admin")
    const { cookie, token } = await session(handler)
    const dry = await (await post(handler, "/actions/retry", [["csrf", token], ["scope", "filter"], ["filter", "state=dead"]], { cookie })).text()
    expect(dry).toContain("data-dry-run=\"2\"")
    const targets = [...dry.matchAll(/name="target" value="([^"]+)"/g)].map((m) => m[1]!.replaceAll("&quot;", "\""))
    expect(targets.sort()).toEqual([deadTarget, JSON.stringify([DASHBOARD_ROWS.dead2.callerDID, DASHBOARD_ROWS.dead2.operationID])].sort())
    const narrowed = await (await post(handler, "/actions/retry", [["csrf", token], ["scope", "filter"], ["filter", "state=dead&owner=did:owner:2"]], { cookie })).text()
    expect(narrowed).toContain("data-dry-run=\"1\"")
    await post(handler, "/actions/retry", [["csrf", token], ["confirm", "yes"], ...targets.map((t) => ["target", t] as const)], { cookie })
    expect((await store.listOperations({ states: ["dead"] })).items).toEqual([])
  })

  it("renders stored text as text: no markup of a row's id, error, target or payload reaches the page, nor a lease token", async () => {
    const handler = handlerFor("admin")
    const { cookie } = await session(handler)
    const pages = [
      "/operations?state=attempted",
      `/operation?caller=did:caller:1&id=${encodeURIComponent(DASHBOARD_ROWS.hostile.operationID)}`,
      "/sync",
      `/sync-state?connector=gcal&owner=${encodeURIComponent(`did:owner:${HOSTILE}`)}`
    ]
    for (const path of pages) {
      const answer = await get(handler, path, cookie)
      expect(answer.status, path).toBe(200)
      expect(answer.headers.get("content-security-policy")).toContain("script-src 'self'")
      const text = await answer.text()
      expect(text, path).not.toContain("<script>window")
      expect(text, path).not.toContain("<img src=x")
      expect(text, path).toContain("&lt;script&gt;window.__pwned=1&lt;/script&gt;&quot;&#39;&gt;&lt;img")
      expect(text, path).not.toContain(SECRET_LEASE)
    }
  })

  it("counts exactly on a small store, and up to a cap on its indexes once the store is large", async () => {
    const handler = handlerFor("read-only")
    const small = await (await get(handler, "/")).text()
    expect(small).toContain("data-counts=\"exact\"")
    await store.runEffect(Effect.flatMap(OperationRepository, (operations) =>
      Effect.forEach(Array.from({ length: 500 }, (_, i) => i), (i) =>
        operations.insert(operationRow({ callerDID: "did:caller:bulk", operationID: `op-bulk-${i}` })), { discard: true })))
    const large = await (await dashboardHandler({ store, basePath: "/ops", refreshMs: 0 })(new Request(`${ORIGIN}/ops/`))).text()
    expect(large).toContain("data-counts=\"bounded\"")
    expect(large).toMatch(/committed<\/span><\/a><\/span><strong>100\+<\/strong>/)
    expect(large).toMatch(/dead<\/span><\/a><\/span><strong>2<\/strong>/)
  })

  it("pauses, caps and resumes a provider account named on the limits page, each confirmed first", async () => {
    const handler = handlerFor("admin")
    const { cookie, token } = await session(handler)
    const scope = [["connector", "gcal"], ["account", "acct-1"]] as const
    const asked = await (await post(handler, "/actions/pause", [["csrf", token], ...scope], { cookie })).text()
    expect(asked).toContain("data-dry-run=\"1\"")
    expect(await store.listProviderLimits()).toEqual([])
    await post(handler, "/actions/pause", [["csrf", token], ...scope, ["minutes", "10"], ["confirm", "yes"]], { cookie })
    await post(handler, "/actions/cap", [["csrf", token], ...scope, ["maxInFlight", "3"], ["confirm", "yes"]], { cookie })
    const [limit] = await store.listProviderLimits()
    expect(limit).toMatchObject({ scope: { connectorName: "gcal", accountKey: "acct-1" }, maxInFlight: 3 })
    expect(limit!.pausedUntil).toBeGreaterThan(Date.now() + 9 * 60_000)
    const page = await (await get(handler, "/limits", cookie)).text()
    expect(page).toContain("data-action=\"resume\"")
    const target = JSON.stringify(["gcal", "acct-1"])
    await post(handler, "/actions/resume", [["csrf", token], ["target", target], ["confirm", "yes"]], { cookie })
    expect((await store.listProviderLimits())[0]!.pausedUntil).toBeNull()
    expect((await store.listOperatorActions()).items.map((item) => item.action)).toEqual(["resumeProvider", "setProviderLimit", "pauseProvider"])
  })
})
