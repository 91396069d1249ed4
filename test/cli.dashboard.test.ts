import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "./support/cli/run.js"
import { DASHBOARD_ROWS, seedDashboardRows } from "./support/dashboard.js"
import { freshSqlitePath } from "./support/databases.js"

// `connector-store dashboard` as installed (the built bundle, `npm run build` first): it prints its loopback address,
// serves read-only by default, acts with --actions and records who did it.

const BIN = fileURLToPath(new URL("../packages/cli/bin/connector-store.js", import.meta.url))
const running: Array<ChildProcess> = []
afterEach(() => {
  for (const child of running.splice(0)) child.kill("SIGTERM")
})

/** Starts the dashboard on `file` with `flags` and answers the address it printed. */
const serve = (file: string, flags: ReadonlyArray<string>): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, "dashboard", "--database", file, "--port", "0", ...flags], { stdio: ["ignore", "pipe", "pipe"] })
    running.push(child)
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const found = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)
      if (found !== null) resolve(found[1]!)
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.on("exit", (code) => reject(new Error(`dashboard exited ${code}: ${out}`)))
  })

const seeded = async () => {
  const file = freshSqlitePath()
  const store = await openConnectorStore({ url: file })
  await seedDashboardRows(store, Date.now())
  await store.close()
  return file
}

const target = JSON.stringify([DASHBOARD_ROWS.dead.callerDID, DASHBOARD_ROWS.dead.operationID])

describe("connector-store dashboard", () => {
  it("serves the pages read-only on loopback by default and refuses every action", async () => {
    const file = await seeded()
    const address = await serve(file, [])
    const page = await fetch(address)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("Overview")
    const cookie = page.headers.get("set-cookie")!.split(";")[0]!
    const refused = await fetch(`${address}actions/retry`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: address.slice(0, -1) },
      body: new URLSearchParams({ csrf: cookie.split("=")[1]!, target, confirm: "yes" }).toString()
    })
    expect(refused.status).toBe(403)
  })

  it("acts with --actions, and the audit log names the user who ran it", async () => {
    const file = await seeded()
    const address = await serve(file, ["--actions"])
    const page = await fetch(address)
    const cookie = page.headers.get("set-cookie")!.split(";")[0]!
    const done = await fetch(`${address}actions/retry`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: address.slice(0, -1) },
      body: new URLSearchParams({ csrf: cookie.split("=")[1]!, target, confirm: "yes" }).toString()
    })
    expect(await done.text()).toContain("data-outcome=\"done\"")
    const store = await openConnectorStore({ url: file, readOnly: true })
    try {
      expect((await store.getOperation(DASHBOARD_ROWS.dead))!.state).toBe("attempted")
      const [entry] = (await store.listOperatorActions()).items
      expect(entry).toMatchObject({ action: "retryOperation", targets: ["did:caller:1/op-dead"], outcome: "done" })
      expect(entry!.actor).toContain("connector-store dashboard")
    } finally {
      await store.close()
    }
  })

  it("refuses --read-only with --actions, and a database that does not exist, before it listens", async () => {
    const both = await runCli(["dashboard", "--database", await seeded(), "--read-only", "--actions"])
    expect(both.code).toBe(1)
    expect(both.stderr).toContain("--read-only and --actions exclude each other")
    const missing = await runCli(["dashboard", "--database", freshSqlitePath()])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("no such database")
  })
})
