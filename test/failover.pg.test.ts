import { afterAll, describe, expect, it } from "vitest"
import { editOf, EventLedger, tally, writeBack, type WriteBackEnd } from "./support/failoverLedger.js"
import {
  BEFORE,
  drive,
  DURING,
  floatingAddress,
  IN_FLIGHT,
  open,
  PREFIX,
  range,
  sendWithoutFinalize,
  WATCH_DUE_IN_MS
} from "./support/failoverRun.js"
import {
  cleanup,
  cutReplication,
  failoverAvailable,
  promote,
  queryOn,
  startPrimary,
  startReplica,
  waitForReplay
} from "./support/pgFailover.js"

// A real failover, as an operator would see it: write-back loops on a primary that streams to a replica; the replica
// falls behind (its link cut, asynchronous) or keeps up (synchronous); the primary crashes, the replica is promoted, and
// every edit is replayed through a store on the promoted server, as the runners coming back would. The provider's
// ledger counts what was applied twice.

const committedOn = async (url: string): Promise<ReadonlySet<string>> =>
  new Set((await queryOn<{ operation_id: string }>(url, `SELECT operation_id FROM ${PREFIX}operation WHERE state = 'committed'`)).rows
    .map((row) => row.operation_id))

/** One failover run: its figures, for the assertions and the closing report. */
const failoverRun = async (mode: "async" | "sync", failoverDoubtMs?: number) => {
  const primary = await startPrimary()
  const replica = await startReplica(primary, { mode })
  const ledger = new EventLedger()
  const first = await open(primary.url)
  const acknowledged = new Set<string>()
  const note = (ends: Map<number, WriteBackEnd>) => {
    for (const [n, end] of ends) if (end === "committed") acknowledged.add(`edit-${n}`)
  }
  note(await drive(first, range(1, BEFORE), ledger))
  await waitForReplay(primary, replica)
  if (mode === "async") await cutReplication(replica)
  note(await drive(first, range(BEFORE + 1, BEFORE + DURING), ledger))
  const leasesEnd = await sendWithoutFinalize(first, range(BEFORE + DURING + 1, BEFORE + DURING + IN_FLIGHT), ledger)
  const firstStatus = await first.getStoreStatus()

  await primary.crash()
  await first.close()
  const promotedUrl = await promote(replica)
  const survived = await committedOn(promotedUrl)
  const lost = Array.from(acknowledged).filter((id) => !survived.has(id)).length

  const second = await open(promotedUrl, failoverDoubtMs)
  try {
    const noticed = await second.getStoreStatus()
    while (second.now() <= leasesEnd) await new Promise((resolve) => setTimeout(resolve, 50))
    const ends = await drive(second, range(1, BEFORE + DURING + IN_FLIGHT), ledger)
    const after = await second.getStoreStatus()
    return {
      edits: BEFORE + DURING + IN_FLIGHT,
      acknowledged: acknowledged.size,
      lost,
      doubleApplied: ledger.doubleApplied,
      replay: tally(Array.from(ends.values())),
      before: firstStatus.durability,
      noticed: noticed.durability,
      doubtfulClaims: after.durability.failover?.doubtfulClaims ?? 0
    }
  } finally {
    await second.close()
  }
}

describe.runIf(failoverAvailable)("a real Postgres failover (Postgres)", () => {
  afterAll(cleanup)

  it("asynchronous: the promoted replica forgot acknowledged write-backs, and none is sent blind again", async () => {
    const run = await failoverRun("async")
    console.log(`failover async: ${JSON.stringify({ ...run, before: undefined, noticed: undefined })}`)
    expect(run.before).toMatchObject({ canLoseAcknowledgedWrites: true, failover: null, replication: { synchronousStandbyNames: "" } })
    expect(run.noticed.failover).toMatchObject({ from: { timeline: 1 }, to: { timeline: 2 }, ended: null })
    expect(run.noticed.failover!.from.systemIdentifier).toBe(run.noticed.failover!.to.systemIdentifier)
    // Every edit acknowledged after the cut was lost with the old primary.
    expect([run.acknowledged, run.lost]).toEqual([BEFORE + DURING, DURING])
    expect(run.doubleApplied).toBe(0)
    // The lost and the in-flight edits went out only as their reissue (412, looked up: ours had landed), or to a person
    // (every tenth edit has no safe re-send).
    const unsafe = (DURING + IN_FLIGHT) / 10
    expect(run.replay).toEqual({ already: BEFORE, reissued: DURING + IN_FLIGHT - unsafe, reconcile_only: unsafe })
    expect(run.doubtfulClaims).toBe(DURING + IN_FLIGHT)
  }, 120_000)

  it("asynchronous with the window off: every forgotten edit with a runner coming back is applied a second time", async () => {
    const run = await failoverRun("async", 0)
    expect(run.noticed.failover).toMatchObject({ from: { timeline: 1 }, to: { timeline: 2 } })
    expect(run.doubleApplied).toBe(DURING + IN_FLIGHT)
  }, 120_000)

  it("under a running store, behind one address: the first connection to the promoted server opens the window", async () => {
    const primary = await startPrimary()
    const replica = await startReplica(primary, { mode: "async" })
    const address = await floatingAddress(primary.port)
    const ledger = new EventLedger()
    const store = await open(address.url)
    try {
      await drive(store, range(1, 20), ledger)
      await waitForReplay(primary, replica)
      await cutReplication(replica)
      await drive(store, range(21, 40), ledger)
      await primary.crash()
      await promote(replica)
      address.switchTo(replica.port)
      // The store was never reopened: its calls fail while the address has no server, then reach the promoted one on
      // new connections, each checked before it is handed to a call.
      const ends: Array<WriteBackEnd> = []
      for (const n of range(1, 40)) {
        for (let tries = 0; ; tries++) {
          try {
            ends.push(await writeBack(store, editOf(n), ledger, store.now() + WATCH_DUE_IN_MS))
            break
          } catch (error) {
            if (tries > 50) throw error
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
        }
      }
      expect(ledger.doubleApplied).toBe(0)
      expect(tally(ends)).toEqual({ already: 20, reissued: 18, reconcile_only: 2 })
      expect((await store.getStoreStatus()).durability.failover).toMatchObject({ from: { timeline: 1 }, to: { timeline: 2 }, doubtfulClaims: 20 })
    } finally {
      await store.close()
      await address.close()
    }
  }, 120_000)

  it("synchronous: nothing acknowledged is lost, nothing is applied twice, and the failover is noticed all the same", async () => {
    const run = await failoverRun("sync")
    console.log(`failover sync: ${JSON.stringify({ ...run, before: undefined, noticed: undefined })}`)
    expect(run.before).toMatchObject({ canLoseAcknowledgedWrites: false })
    expect(run.before.replication?.synchronousStandbyNames).not.toBe("")
    expect(run.noticed.failover).toMatchObject({ from: { timeline: 1 }, to: { timeline: 2 } })
    expect([run.acknowledged, run.lost]).toEqual([BEFORE + DURING, 0])
    expect(run.doubleApplied).toBe(0)
    // The in-flight edits' rows survived, marked: in doubt as after any crash.
    expect(run.replay).toEqual({ already: BEFORE + DURING, reissued: IN_FLIGHT - IN_FLIGHT / 10, reconcile_only: IN_FLIGHT / 10 })
  }, 120_000)
})
