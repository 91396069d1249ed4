import {
  ConnectorStore,
  clockFrom,
  OperationRepository,
  type ProjectionWatch,
  RelistRepository,
  type RelistScope,
  WatchRepository,
  WinnerReader
} from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import pg from "pg"
import { afterEach, describe, expect, it } from "vitest"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { claimInput } from "./operations.fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { postgresAdapter } from "./support/stores.js"

/**
 * The relist sweep against writers in another store (its own pool) on one
 * Postgres database, with real locks deciding who goes first. The runner's
 * store has a gate in its ports: armed, a port call waits there, inside the
 * runner's transaction and holding every lock taken so far, until the test
 * opens it. A raw connection holding a row lock makes the other order.
 */
const postgres = pgAvailable ? await postgresAdapter() : undefined

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }

/** A verified watch of `scope`, written well before any run starts. */
const tracked = (sourceID: string, documentID = `doc-${sourceID}`): ProjectionWatch =>
  watchRow({
    ...scope,
    sourceID,
    documentID,
    verifiedStateDigest: "v1",
    observedWinnerDigest: "v1",
    verificationStatus: "verified",
    nextAttemptAt: null,
    createdAt: NOW - 2_000,
    updatedAt: NOW - 1_000
  })

/** Where the runner's port calls can be held: the last reads of a candidate's locked basis, and a page's receipts. */
type GatePoint = "getBaseline" | "putReceipts"

/** A gate: `arm(point)` makes the next call at `point` wait; `reached` resolves when one does, `open()` lets it go. */
const makeGate = () => {
  let armed: { point: GatePoint; reached: () => void; opened: Promise<void> } | undefined
  let open = () => {}
  const pass = (point: GatePoint) =>
    Effect.promise(() => {
      if (armed === undefined || armed.point !== point) return Promise.resolve()
      const { reached, opened } = armed
      armed = undefined
      reached()
      return opened
    })
  return {
    pass,
    arm: (point: GatePoint) => {
      let reached = () => {}
      const whenReached = new Promise<void>((resolve) => reached = resolve)
      const opened = new Promise<void>((resolve) => open = resolve)
      armed = { point, reached, opened }
      return { reached: whenReached, open: () => open() }
    }
  }
}

/** The relist repository with the gate in front of the calls it can hold. */
const gatedRelist = (gate: ReturnType<typeof makeGate>) =>
  Layer.effect(
    RelistRepository,
    Effect.map(RelistRepository, (relist) => ({
      ...relist,
      getBaseline: (runID: string, sourceIDs: ReadonlyArray<string>) => Effect.zipRight(gate.pass("getBaseline"), relist.getBaseline(runID, sourceIDs)),
      putReceipts: (...args: Parameters<typeof relist.putReceipts>) => Effect.zipRight(gate.pass("putReceipts"), relist.putReceipts(...args))
    }))
  )

let operations = 0

/**
 * The runner's store (Effect API, gated ports, clock at `runnerNow`), the
 * writer's store (Promise API, its own pool, clock at `writerNow`), and a raw
 * client for locks and for watching who waits.
 */
const setup = async (clocks: { readonly runner: number; readonly writer: number }, winners: Record<string, string> = {}) => {
  const connection = await postgres!.connection()
  const writer = await Sql.openConnectorStore({
    ...connection,
    clock: "local",
    now: () => clocks.writer,
    readWinner: (documentID) => winners[documentID] ?? null
  })
  closers.push(() => writer.close())
  const gate = makeGate()
  const runnerLayer = ConnectorStore.layer.pipe(
    Layer.provide(gatedRelist(gate)),
    Layer.provideMerge(Sql.layerPorts),
    Layer.provideMerge(Layer.succeed(WinnerReader, {})),
    Layer.provideMerge(Layer.orDie(Sql.Tables.layer(connection.tablePrefix))),
    Layer.provideMerge(Sql.layerClient({ url: connection.url, maxConnections: 4 })),
    Layer.provideMerge(Layer.setClock(clockFrom(() => clocks.runner)))
  )
  const runtime = ManagedRuntime.make(runnerLayer)
  closers.push(() => runtime.dispose())
  const runner = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
    runtime.runPromise(Effect.flatMap(ConnectorStore, use))
  /** What the runner's call failed with (the test fails if it succeeded). */
  const refused = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
    runtime.runPromise(Effect.flip(Effect.flatMap(ConnectorStore, use)))
  const seed = (...rows: ReadonlyArray<ProjectionWatch>) =>
    runtime.runPromise(Effect.flatMap(WatchRepository, (repo) => Effect.forEach(rows, (row) => repo.insert(row))))
  const operationStates = (documentID: string) =>
    runtime.runPromise(Effect.flatMap(OperationRepository, (repo) => repo.listByDocuments([documentID])))
      .then((rows) => rows.map((row) => row.state))
  const holder = new pg.Client({ connectionString: connection.url })
  await holder.connect()
  closers.push(() => holder.end())
  /** Opens a transaction on its own connection that holds `sql`'s row locks until released. */
  const hold = async (sql: string, params: ReadonlyArray<unknown>) => {
    const client = new pg.Client({ connectionString: connection.url })
    await client.connect()
    closers.push(() => client.end())
    await client.query("BEGIN")
    expect((await client.query(`${sql} FOR UPDATE`, [...params])).rowCount).toBe(1)
    return () => client.query("COMMIT")
  }
  const holdCandidate = (sourceID: string) =>
    hold(`SELECT 1 FROM ${connection.tablePrefix}relist_candidate WHERE owner_did = $1 AND source_id = $2`, [scope.ownerDID, sourceID])
  /** Resolves once `count` statements of this database wait on a lock; fails after 5 s of none. */
  const waiting = async (count: number) => {
    for (const deadline = Date.now() + 5_000;;) {
      if (Date.now() > deadline) throw new Error(`fewer than ${count} statements wait on a lock`)
      const { rows: [row] } = await holder.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`
      )
      if (Number(row!.n) >= count) return
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }

  /** Claims and sends a write-back for `sourceID` on `documentID` through the writer; returns how to finalize it. */
  const sent = async (sourceID: string, documentID: string) => {
    const operationID = `op-${++operations}`
    const input = claimInput({ operationID, sourceID, documentID, deterministicEventID: `event-${operationID}` })
    const claim = await writer.claimOperation(input)
    if (claim.outcome !== "claimed") throw new Error(`claim ${claim.outcome}`)
    expect((await writer.markOperationSent({ callerDID: input.callerDID, operationID }, { leaseToken: claim.lease.token })).outcome)
      .toBe("sent")
    return () =>
      writer.finalizeOperationAndArmWatch(
        { callerDID: input.callerDID, operationID },
        { leaseToken: claim.lease.token, sourceID, documentID, watchDueAt: clocks.writer }
      )
  }
  /** The watch's new state verified against the document's winner, by the writer. */
  const verified = async (sourceID: string) => {
    const identity = { ...scope, sourceID }
    const watch = await writer.getWatch(identity)
    expect(await writer.claimWatchAttempt(identity, { until: clocks.writer + 1_000, generation: watch!.repairGeneration, now: clocks.writer }))
      .toBe(true)
    expect(await writer.recordVerification(identity, {
      generation: watch!.repairGeneration,
      claimedUntil: clocks.writer + 1_000,
      fetchedDigest: winners[watch!.documentID] ?? null,
      maxAttempts: 3,
      dueAt: clocks.writer
    })).toBe("verified")
  }
  /** A whole write-back by the writer: committed at the provider, finalized (arming the watch) and verified. */
  const writeBack = async (sourceID: string, documentID: string) => {
    expect((await (await sent(sourceID, documentID))()).outcome).toBe("committed")
    await verified(sourceID)
  }

  return { writer, runner, refused, seed, operationStates, holdCandidate, waiting, gate, sent, verified, writeBack }
}

type Setup = Awaited<ReturnType<typeof setup>>

const all = { limit: 100, maxDeletionFraction: 1 } as const
const seen = (...sourceIDs: ReadonlyArray<string>) => sourceIDs.map((sourceID) => ({ sourceID, digest: "v1" }))

/** A complete run of the runner that saw s2 only: s1 is a deletion candidate. */
const completeRunWithoutS1 = async ({ runner, seed }: Setup) => {
  await seed(tracked("s1"), tracked("s2"))
  const run = await runner((s) => s.startRelistRun(scope))
  expect(await runner((s) => s.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: seen("s2"), complete: true })))
    .toBe("completed")
  expect((await runner((s) => s.listSweepCandidates(run.runID, all))).map((c) => [c.sourceID, c.kind])).toEqual([["s1", "deleted"]])
  return { runID: run.runID, ref: { runID: run.runID, sourceID: "s1" } }
}

const candidateStatus = async ({ runner }: Setup, sourceID: string) =>
  Option.getOrThrow(await runner((s) => s.getSweepCandidate({ ...scope, sourceID }))).status

describe.runIf(postgres !== undefined)("the relist sweep racing write-backs of another store on Postgres", () => {
  it("a write-back that commits and verifies while the run lists, on a clock stepped back behind the run's start, is never judged by it", async () => {
    // The runner's clock reads ten minutes after the writer's: by wall clock, every write lands "before" the run.
    const clocks = { runner: NOW + 600_000, writer: NOW }
    const ctx = await setup(clocks, { "doc-s9": "w9", "doc-s4": "w4" })
    const { runner, refused, seed, gate, writeBack, writer } = ctx
    await seed(tracked("s1"), tracked("s2"), tracked("s3"), tracked("s4"))
    const run = await runner((s) => s.startRelistRun(scope))
    expect(await runner((s) => s.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c1", receipts: seen("s1", "s2") })))
      .toBe("committed")
    // The completing page is in its transaction, the run's row locked, when the writer's write-backs land:
    // s9 is a new entity (created after the listing passed it), s4 an existing one written during the run.
    const held = gate.arm("putReceipts")
    const completing = runner((s) => s.commitSweepCheckpoint(run.runID, { page: 2, cursor: null, receipts: seen("s3"), complete: true }))
    await held.reached
    await writeBack("s9", "doc-s9")
    await writeBack("s4", "doc-s4")
    const s9 = await writer.getWatch({ ...scope, sourceID: "s9" })
    expect(s9!.createdAt).toBeLessThan(run.startedAt)
    held.open()
    expect(await completing).toBe("completed")

    expect(await runner((s) => s.listSweepCandidates(run.runID, all))).toEqual([])
    expect(await runner((s) => s.getRelistRun(run.runID))).toMatchObject({ _tag: "Some", value: { deletionCount: 0 } })
    for (const sourceID of ["s9", "s4"]) {
      const ref = { runID: run.runID, sourceID }
      expect(Option.isNone(await runner((s) => s.getSweepCandidate({ ...scope, sourceID })))).toBe(true)
      expect(await refused((s) => s.recordSweepOutcome(ref, "delete_local"))).toMatchObject({ _tag: "SweepCandidateNotFound", sourceID })
      expect(await refused((s) => s.markSweepCandidateApplied(ref))).toMatchObject({ _tag: "SweepCandidateNotFound", sourceID })
      expect(await writer.getWatch({ ...scope, sourceID })).toMatchObject({ verificationStatus: "verified" })
    }
  })

  describe("an update to a listed deletion commits and verifies while the runner decides", () => {
    it("the update first (the decision waits on the candidate's lock): the decision is refused as withdrawn", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      const release = await ctx.holdCandidate("s1")
      const deciding = ctx.refused((s) => s.recordSweepOutcome(ref, "delete_local"))
      await ctx.waiting(1)
      await ctx.writeBack("s1", "doc-s1")
      await release()
      expect(await deciding).toMatchObject({ _tag: "SweepCandidateWithdrawn", method: "recordSweepOutcome", sourceID: "s1", reason: "watch-changed" })
      expect(await candidateStatus(ctx, "s1")).toBe("open")
      expect(await ctx.refused((s) => s.markSweepCandidateApplied(ref))).toMatchObject({ _tag: "SweepCandidateWithdrawn" })
    })

    it("the decision first (the finalize waits on the document's lock): recorded, then applying it is refused as withdrawn", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      const held = ctx.gate.arm("getBaseline")
      const deciding = ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))
      await held.reached
      // The runner holds the candidate, the document's slot and the watch; the write-back is claimed
      // after the runner read the document's operations, and its finalize waits.
      const finalize = await ctx.sent("s1", "doc-s1")
      const finalizing = finalize()
      await ctx.waiting(1)
      held.open()
      expect(await deciding).toBe("recorded")
      expect((await finalizing).outcome).toBe("committed")
      await ctx.verified("s1")
      expect(await ctx.refused((s) => s.markSweepCandidateApplied(ref)))
        .toMatchObject({ _tag: "SweepCandidateWithdrawn", method: "markSweepCandidateApplied", sourceID: "s1", reason: "watch-changed" })
      expect(await candidateStatus(ctx, "s1")).toBe("decided")
      expect(await ctx.runner((s) => s.listSweepCandidates(ref.runID, all))).toEqual([])
    })
  })

  describe("a decided deletion is applied while another store writes its document", () => {
    it("the update first (applying waits on the candidate's lock): refused as withdrawn, nothing applied", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      expect(await ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))).toBe("recorded")
      const release = await ctx.holdCandidate("s1")
      const applying = ctx.refused((s) => s.markSweepCandidateApplied(ref))
      await ctx.waiting(1)
      await ctx.writeBack("s1", "doc-s1")
      await release()
      expect(await applying).toMatchObject({ _tag: "SweepCandidateWithdrawn", method: "markSweepCandidateApplied", sourceID: "s1", reason: "watch-changed" })
      expect(await candidateStatus(ctx, "s1")).toBe("decided")
    })

    it("a new source finalized on the same document first: refused as withdrawn (watch-gone), nothing applied", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1b" })
      const { ref } = await completeRunWithoutS1(ctx)
      expect(await ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))).toBe("recorded")
      const release = await ctx.holdCandidate("s1")
      const applying = ctx.refused((s) => s.markSweepCandidateApplied(ref))
      await ctx.waiting(1)
      await ctx.writeBack("s1b", "doc-s1")
      await release()
      expect(await applying).toMatchObject({ _tag: "SweepCandidateWithdrawn", sourceID: "s1", documentID: "doc-s1", reason: "watch-gone" })
      expect(await candidateStatus(ctx, "s1")).toBe("decided")
      expect(await ctx.writer.getWatchByDocument("doc-s1")).toMatchObject({ sourceID: "s1b" })
    })

    it("applied with the applier's work in the store's transaction: a write-back started meanwhile lands wholly after the apply", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      expect(await ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))).toBe("recorded")
      let finalizing: ReturnType<Awaited<ReturnType<Setup["sent"]>>> | undefined
      const applied = await ctx.runner((s) =>
        s.applySweepCandidate(ref, () =>
          Effect.promise(async () => {
            // The local deletion happens here. A write-back claimed now finalizes only after it commits.
            finalizing = (await ctx.sent("s1", "doc-s1"))()
            await ctx.waiting(1)
          })))
      expect(applied).toBe("applied")
      expect((await finalizing!).outcome).toBe("committed")
      expect(await candidateStatus(ctx, "s1")).toBe("applied")
    })

    it("an update that commits before the apply takes the candidate's lock: the applier never runs", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      expect(await ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))).toBe("recorded")
      const release = await ctx.holdCandidate("s1")
      let ran = 0
      const applying = ctx.refused((s) => s.applySweepCandidate(ref, () => Effect.sync(() => ran++)))
      await ctx.waiting(1)
      await ctx.writeBack("s1", "doc-s1")
      await release()
      expect(await applying).toMatchObject({ _tag: "SweepCandidateWithdrawn", method: "applySweepCandidate", reason: "watch-changed" })
      expect(ran).toBe(0)
      expect(await candidateStatus(ctx, "s1")).toBe("decided")
    })

    it("applying first (the finalize waits on the document's lock): applied, and the write lands wholly after it", async () => {
      const ctx = await setup({ runner: NOW + 10, writer: NOW + 20 }, { "doc-s1": "w1" })
      const { ref } = await completeRunWithoutS1(ctx)
      expect(await ctx.runner((s) => s.recordSweepOutcome(ref, "delete_local"))).toBe("recorded")
      const before = await ctx.writer.getWatch({ ...scope, sourceID: "s1" })
      const held = ctx.gate.arm("getBaseline")
      const applying = ctx.runner((s) => s.markSweepCandidateApplied(ref))
      await held.reached
      const finalize = await ctx.sent("s1", "doc-s1")
      const finalizing = finalize()
      await ctx.waiting(1)
      // Still waiting: the watch is as the runner locked it.
      expect(await ctx.writer.getWatch({ ...scope, sourceID: "s1" })).toEqual(before)
      held.open()
      expect(await applying).toBe("applied")
      expect((await finalizing).outcome).toBe("committed")
      expect((await ctx.writer.getWatch({ ...scope, sourceID: "s1" }))!.version).toBeGreaterThan(before!.version)
      expect(await candidateStatus(ctx, "s1")).toBe("applied")
      expect(await ctx.operationStates("doc-s1")).toEqual(["committed"])
    })
  })
})
