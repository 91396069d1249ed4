import type { SyncLease, SyncProgressCASCurrent } from "@connector-store/core"
import { Exit } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { adaptersUnderTest } from "../support/stores.js"
import { appending } from "../support/syncstate.js"
import { modelParameters } from "./runs.js"
import {
  applyInterference,
  emptyModel,
  expectAgreement,
  expectReads,
  type Interference,
  interferenceArbitrary,
  type ModelRead,
  type ModelRow,
  modelProgress,
  modelSet,
  OWNERS,
  RealSyncStore,
  RUNNERS,
  type SyncModel
} from "./syncstate-model.js"
import { propertyRuns } from "../support/runs.js"

const adapters = await adaptersUnderTest()

type Command = fc.AsyncCommand<SyncModel, RealSyncStore>
const ok = <A>(exit: Exit.Exit<A, unknown>, what: string): A =>
  Exit.getOrElse(exit, () => expect.unreachable(`${what} failed: ${String(exit)}`))

const REPORTS = [
  { status: "idle", lastSyncedAt: "t1", entityCount: 1 },
  { status: "syncing", lastSyncedAt: "t2", entityCount: 2 },
  { status: "error", lastSyncedAt: "t3", entityCount: 3 }
] as const

let tags = 0

class SetReport implements Command {
  constructor(readonly owner: string, readonly report: number, readonly withCheckpoint: boolean) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const report = REPORTS[this.report]!
    const log = this.withCheckpoint ? [`s${++tags}`] : undefined
    modelSet(m, this.owner, report, log)
    ok(await r.run((s) => s.setSyncState(r.connector, this.owner, log === undefined ? report : { ...report, checkpoint: { log } })), "set")
    await expectAgreement(m, r, this.owner)
  }
  toString = () => `set(${this.owner}, ${this.report}${this.withCheckpoint ? ", checkpoint" : ""})`
}

class Delete implements Command {
  constructor(readonly owner: string) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const existed = m.rows.delete(this.owner)
    expect(ok(await r.run((s) => s.deleteSyncState(r.connector, this.owner)), "delete")).toBe(existed)
    await expectAgreement(m, r, this.owner)
  }
  toString = () => `delete(${this.owner})`
}

/**
 * A progress write with other writers landing between its reads and its
 * writes: the model replays the attempts (read, interference, write if the
 * row is still the same incarnation at the same version) and predicts what
 * each recompute sees, whether the call lands, and the row it leaves.
 */
class Progress implements Command {
  constructor(readonly owner: string, readonly maxRetries: number, readonly interference: ReadonlyArray<Interference>) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const tag = `p${++tags}`
    const queue = [...this.interference]
    const reads: Array<ModelRead | undefined> = []
    let landed = false
    for (let attempt = 0; attempt <= this.maxRetries && !landed; attempt++) {
      const read = m.rows.get(this.owner)
      reads.push(read && { generation: read.generation, version: read.version, log: read.log })
      const x = queue.shift()
      if (x !== undefined) applyInterference(m, this.owner, x)
      const now = m.rows.get(this.owner)
      landed = read === undefined ? now === undefined : now?.generation === read.generation && now.version === read.version
      if (landed) modelProgress(m, this.owner, tag)
    }

    r.interfere(this.owner, this.interference)
    const seen: Array<SyncProgressCASCurrent | null> = []
    const exit = await r.run((s) => s.updateSyncProgress(r.connector, this.owner, appending(tag, seen), { maxRetries: this.maxRetries }))
    expect(r.discardInterference()).toBe(queue.length)
    if (landed) {
      expect(ok(exit, "progress").checkpoint).toEqual({ log: m.rows.get(this.owner)!.log })
    } else {
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("SyncProgressExhausted")
    }
    await expectAgreement(m, r, this.owner)
    expectReads(r, seen, reads)
  }
  toString = () => `progress(${this.owner}, maxRetries ${this.maxRetries}, [${this.interference.map((x) => x.kind).join(", ")}])`
}

const holds = (m: SyncModel, key: string, row: ModelRow | undefined) =>
  row?.lease != null && m.claims.get(key) === row.lease.claim

class Claim implements Command {
  constructor(readonly runner: string, readonly owner: string, readonly leaseMs: number) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const key = `${this.runner}/${this.owner}`
    const row = m.rows.get(this.owner)
    const claim = await r.run((s) => s.claimSyncLease(r.connector, this.owner, { now: m.now, leaseMs: this.leaseMs }))
    const outcome = ok(claim, "claim")
    if (row?.lease != null && row.lease.expiresAt > m.now) {
      expect(outcome).toEqual({ outcome: "busy", leaseExpiresAt: row.lease.expiresAt })
    } else {
      const lease = { claim: ++m.claimCount, expiresAt: m.now + this.leaseMs }
      if (row === undefined) modelSet(m, this.owner, { status: "idle", lastSyncedAt: "", entityCount: 0 }, undefined)
      m.rows.set(this.owner, { ...m.rows.get(this.owner)!, lease })
      m.claims.set(key, lease.claim)
      expect(outcome.outcome).toBe("claimed")
      if (outcome.outcome === "claimed") {
        expect(outcome.lease.expiresAt).toBe(lease.expiresAt)
        r.leases.set(key, outcome.lease)
      }
    }
    await expectAgreement(m, r, this.owner)
  }
  toString = () => `claim(${this.runner}, ${this.owner}, ${this.leaseMs}ms)`
}

const leaseOf = (r: RealSyncStore, runner: string, owner: string): SyncLease =>
  r.leases.get(`${runner}/${owner}`) ?? { connectorName: r.connector, ownerDID: owner, token: `never-claimed-by-${runner}`, expiresAt: 0 }

class Renew implements Command {
  constructor(readonly runner: string, readonly owner: string, readonly leaseMs: number) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const key = `${this.runner}/${this.owner}`
    const row = m.rows.get(this.owner)
    const renewal = ok(await r.run((s) => s.renewSyncLease(leaseOf(r, this.runner, this.owner), { now: m.now, leaseMs: this.leaseMs })), "renew")
    if (holds(m, key, row)) {
      m.rows.set(this.owner, { ...row!, lease: { claim: row!.lease!.claim, expiresAt: m.now + this.leaseMs } })
      expect(renewal.outcome).toBe("renewed")
      if (renewal.outcome === "renewed") r.leases.set(key, renewal.lease)
    } else {
      expect(renewal).toEqual({ outcome: "lost" })
    }
    await expectAgreement(m, r, this.owner)
  }
  toString = () => `renew(${this.runner}, ${this.owner}, ${this.leaseMs}ms)`
}

class Release implements Command {
  constructor(readonly runner: string, readonly owner: string) {}
  check = () => true
  async run(m: SyncModel, r: RealSyncStore) {
    const key = `${this.runner}/${this.owner}`
    const row = m.rows.get(this.owner)
    const held = holds(m, key, row)
    if (held) m.rows.set(this.owner, { ...row!, lease: null })
    expect(ok(await r.run((s) => s.releaseSyncLease(leaseOf(r, this.runner, this.owner))), "release")).toBe(held)
    await expectAgreement(m, r, this.owner)
  }
  toString = () => `release(${this.runner}, ${this.owner})`
}

class Tick implements Command {
  constructor(readonly by: number) {}
  check = () => true
  async run(m: SyncModel) {
    m.now += this.by
  }
  toString = () => `tick(+${this.by})`
}

const owner = fc.constantFrom(...OWNERS)
const runner = fc.constantFrom(...RUNNERS)
const leaseMs = fc.constantFrom(1, 50, 100)
const reportCommands = [
  fc.tuple(owner, fc.integer({ min: 0, max: REPORTS.length - 1 }), fc.boolean()).map(([o, i, c]) => new SetReport(o, i, c)),
  owner.map((o) => new Delete(o))
]

/** Progress writes with 0-4 other writers landing between their reads and writes, among sets and deletes. */
const progressCommands = fc.commands([
  ...reportCommands,
  fc.tuple(owner, fc.integer({ min: 0, max: 3 }), fc.array(interferenceArbitrary, { maxLength: 4 }))
    .map(([o, retries, xs]) => new Progress(o, retries, xs))
], { maxCommands: 12 })

/** Two runners claiming, renewing and releasing leases while time passes and rows come and go. */
const leaseCommands = fc.commands([
  ...reportCommands,
  owner.map((o) => new Progress(o, 0, [])),
  fc.tuple(runner, owner, leaseMs).map(([ru, o, ms]) => new Claim(ru, o, ms)),
  fc.tuple(runner, owner, leaseMs).map(([ru, o, ms]) => new Renew(ru, o, ms)),
  fc.tuple(runner, owner).map(([ru, o]) => new Release(ru, o)),
  fc.integer({ min: 0, max: 120 }).map((by) => new Tick(by))
], { maxCommands: 20 })

describe("sync state agrees with a plain model after every command", () => {
  for (const adapter of adapters) {
    for (const [name, commands] of [
      ["updateSyncProgress interleaved with other writers, deletes and recreates (ABA)", progressCommands],
      ["the sync lease: claims, renewals, releases, takeovers as time passes", leaseCommands]
    ] as const) {
      it(`${adapter.name}: ${name}`, async () => {
        const real = new RealSyncStore(adapter)
        try {
          await fc.assert(
            fc.asyncProperty(commands, async (cmds) => {
              await fc.asyncModelRun(() => ({ model: emptyModel(), real: real.fresh() }), cmds)
            }),
            { ...modelParameters(), numRuns: propertyRuns(200) }
          )
        } finally {
          await real.dispose()
        }
      }, 600_000)
    }
  }
})
