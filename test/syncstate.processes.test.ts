import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { freshSqlitePath } from "./support/databases.js"
import { runProcess } from "./support/processes.js"
import { logOf } from "./support/syncstate.js"

// Separate OS processes on one SQLite file (on the built packages): a runner
// whose sync lease lapses keeps writing, fenced by its token, while another
// process takes the lease over and writes too.

const C = "gcal"
const O = "did:owner:1"
const CALLS = 200

interface Run {
  readonly token: string
  readonly outcomes: ReadonlyArray<"landed" | "lost">
}

const parse = (out: string): Run => JSON.parse(out) as Run

/** The tags of one part's progress writes whose outcome is `landed`, in order. */
const landedTags = (part: string, run: Run) =>
  run.outcomes.flatMap((outcome, i) => outcome === "landed" && i % 2 === 0 ? [`${part}-${i}`] : [])

describe("writes fenced by the sync lease, across processes on SQLite", () => {
  it("a stale holder racing a takeover lands nothing after it: its refusals are final, its landed writes all precede the new holder's", async () => {
    const file = freshSqlitePath()
    const setup = await openConnectorStore({ url: file })
    const claim = await setup.claimSyncLease(C, O, { now: NOW, leaseMs: 1_000 })
    await setup.close()
    if (claim.outcome !== "claimed") return expect.unreachable("first claim")

    const [stale, taker] = await Promise.all([
      runProcess("sync-writer", [file, "stale", "0", "2", String(CALLS), claim.lease.token]).then(parse),
      runProcess("sync-writer", [file, "take", "1", "2", String(CALLS), String(NOW + 1_000)]).then(parse)
    ])
    expect(taker.token).not.toBe(claim.lease.token)
    expect(taker.outcomes.every((outcome) => outcome === "landed")).toBe(true)
    // The takeover waited for three of the stale holder's progress writes.
    expect(landedTags("stale", stale).length).toBeGreaterThanOrEqual(3)
    // Once refused, always refused: the old token never comes back.
    const firstLost = stale.outcomes.indexOf("lost")
    if (firstLost >= 0) expect(stale.outcomes.slice(firstLost).every((outcome) => outcome === "lost")).toBe(true)

    const store = await openConnectorStore({ url: file })
    try {
      const state = (await store.getSyncState(C, O))!
      // Each landed progress write is in the log once; the stale holder's all come before the new holder's.
      expect(logOf(state.checkpoint)).toEqual([...landedTags("stale", stale), ...landedTags("take", taker)])
      expect(state).toMatchObject({ lastSyncedAt: `take-${CALLS - 1}`, leaseExpiresAt: NOW + 1_000 + 60_000 })
      // After the takeover, a stale write is refused and changes nothing.
      const late = await runProcess("sync-writer", [`${file}`, "stale", "0", "1", "2", claim.lease.token]).then(parse)
      expect(late.outcomes).toEqual(["lost", "lost"])
      expect(await store.getSyncState(C, O)).toEqual(state)
    } finally {
      await store.close()
    }
  })
})
