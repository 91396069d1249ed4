import {
  clockFrom,
  ConnectorStore,
  type PersistenceError,
  type ProjectionWatch,
  type RelistRun,
  type RelistRunState,
  type RelistScope,
  type SweepCandidate,
  type SweepCandidateKind,
  type SweepCandidateStatus,
  type SweepOutcome,
  WatchRepository
} from "@connector-store/core"
import { Tables } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { type AdapterUnderTest, adaptersUnderTest, type StoreServices } from "../support/stores.js"
import { commandsConstraints, modelParameters } from "./runs.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

// Random relist runs against a plain model: runs that crash mid-listing and
// resume from their checkpoint, forked runners racing for the same page,
// runners of superseded or abandoned runs, provider and watch changes while
// listing, decisions, applies, failures, give-ups, re-arms and retention.
// Every outcome and error must be the model's; after each run the whole
// relist state must be, and the sweep's invariants must hold on the store.
// Runs per adapter: CONNECTOR_STORE_MODEL_RUNS (200 by default); a failure
// replays with the printed seed, path and replayPath (see ./runs.ts).

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:m", connectorName: "gcal", model: "Event", accountKey: "acct" }
/** A watch of another scope that no relist of `scope` may ever judge. */
const bystander = { ...scope, accountKey: "other", sourceID: "e0", documentID: "doc-bystander" }
const ENTITIES = ["e0", "e1", "e2", "e3", "e4", "e5"] as const
const PAGE = 2

// ---------------------------------------------------------------------------
// The model: plain tables, the rules restated as simply as they can be.

interface MRun {
  readonly runID: string
  state: RelistRunState
  cursor: string | null
  pagesCommitted: number
  readonly startedAt: number
  updatedAt: number
  completedAt: number | null
  endedAt: number | null
  counts: { receipts: number; tracked: number; deletions: number; divergences: number } | null
  readonly receipts: Map<string, { digest: string | null; seenAt: number }>
  /** What the provider held when the run started: the listing its runners page through. */
  readonly listing: ReadonlyArray<readonly [string, string | null]>
  /** Every watch as it was when the run started: its version and creation. */
  readonly baseline: ReadonlyMap<string, { readonly version: number; readonly createdAt: number }>
}
interface MWatch { verified: string | null; updatedAt: number; version: number; readonly createdAt: number }
interface MCandidate {
  runID: string
  kind: SweepCandidateKind
  providerDigest: string | null
  localDigest: string | null
  status: SweepCandidateStatus
  outcome: SweepOutcome | null
  attempts: number
  lastError: readonly [string, string] | null
}
interface Runner { readonly runID: string; page: number; offset: number }

class Model {
  now = 1_000
  readonly provider = new Map<string, string | null>([["e1", "v1"], ["e2", "v1"], ["e3", null], ["e5", "v2"]])
  /** Tracked before any run: e1 agrees with the provider, e2 diverged, e3 has no provider digest, e4 is gone. */
  readonly watches = new Map<string, MWatch>(
    ([["e1", "v1"], ["e2", "v0"], ["e3", "v1"], ["e4", "v1"]] as const).map(([sourceID, verified]) =>
      [sourceID, { verified, updatedAt: 0, version: 0, createdAt: 0 }]
    )
  )
  readonly runs = new Map<string, MRun>()
  readonly candidates = new Map<string, MCandidate>()
  readonly runners: Array<Runner> = []
  /** Every run id ever handed out, collected or not (for stale calls). */
  readonly runIDs: Array<string> = []
  current(): MRun | undefined {
    return Array.from(this.runs.values()).find((run) => ["started", "listing", "complete"].includes(run.state))
  }
}

const sortedSources = <A>(map: ReadonlyMap<string, A>) => Array.from(map.keys()).sort()

/** The stored watch of a model watch of `scope`: settled, verified at its digest. */
const watchRow = (sourceID: string, watch: MWatch): ProjectionWatch => ({
  ...scope,
  sourceID,
  documentID: `doc-${sourceID}`,
  verifiedStateDigest: watch.verified,
  observedWinnerDigest: watch.verified,
  verificationStatus: "verified",
  verificationAttempts: 0,
  repairGeneration: 0,
  nextAttemptAt: null,
  claimedUntil: null,
  deferReason: null,
  version: watch.version,
  createdAt: watch.createdAt,
  updatedAt: watch.updatedAt
})

/** True when the watch of `sourceID` is the very row `run` found at its start (no clock involved). */
const unchangedSince = (m: Model, run: MRun | undefined, sourceID: string): boolean => {
  const watch = m.watches.get(sourceID)
  const then = run?.baseline.get(sourceID)
  return watch !== undefined && then !== undefined && watch.version === then.version && watch.createdAt === then.createdAt
}

/**
 * A candidate is withdrawn once its watch was written after its run started
 * (this model's watches never leave, move or share a document, and it has no
 * operations).
 */
const withdrawn = (m: Model, row: MCandidate, sourceID: string): boolean => !unchangedSince(m, m.runs.get(row.runID), sourceID)

/** The candidate rule, restated: judged watches unseen (deleted) or seen with another known digest (diverged). */
const complete = (m: Model, run: MRun) => {
  const derived = new Map<string, MCandidate>()
  for (const [sourceID, watch] of m.watches) {
    if (!unchangedSince(m, run, sourceID)) continue
    const receipt = run.receipts.get(sourceID)
    const kind = receipt === undefined
      ? "deleted"
      : receipt.digest !== null && watch.verified !== null && receipt.digest !== watch.verified
      ? "diverged"
      : undefined
    if (kind === undefined) continue
    const fresh: MCandidate = {
      runID: run.runID,
      kind,
      providerDigest: receipt?.digest ?? null,
      localDigest: watch.verified,
      status: "open",
      outcome: null,
      attempts: 0,
      lastError: null
    }
    const old = m.candidates.get(sourceID)
    // A given-up case stays given up; it only follows the newer run.
    derived.set(sourceID, old?.status === "given_up" ? { ...old, ...fresh, status: old.status, outcome: old.outcome, attempts: old.attempts, lastError: old.lastError } : fresh)
  }
  for (const [sourceID, row] of m.candidates) if (row.status !== "given_up") m.candidates.delete(sourceID)
  for (const [sourceID, row] of derived) m.candidates.set(sourceID, row)
  const kinds = Array.from(derived.values()).map((c) => c.kind)
  run.counts = {
    receipts: run.receipts.size,
    tracked: m.watches.size,
    deletions: kinds.filter((k) => k === "deleted").length,
    divergences: kinds.filter((k) => k === "diverged").length
  }
}

// ---------------------------------------------------------------------------
// The store under test: one per adapter for the whole property, emptied
// between runs, its clock the model's.

class Real {
  private runtime: ManagedRuntime.ManagedRuntime<StoreServices, PersistenceError> | undefined
  model: Model = new Model()
  constructor(readonly adapter: AdapterUnderTest) {}

  async fresh(model: Model): Promise<void> {
    this.model = model
    const cleared = this.runtime !== undefined && await this.runtime.runPromise(Effect.gen(function*() {
      const sql = yield* Effect.serviceOption(SqlClient)
      const tables = yield* Effect.serviceOption(Tables)
      if (Option.isNone(sql) || Option.isNone(tables)) return false
      const t = tables.value
      for (const table of [t.relistRun, t.relistReceipt, t.relistCandidate, t.relistBaseline, t.projectionWatch]) {
        yield* sql.value.unsafe(`DELETE FROM ${table}`)
      }
      return true
    }))
    if (!cleared) {
      await this.runtime?.dispose()
      this.runtime = ManagedRuntime.make(this.adapter.layer({}))
    }
    const seeded = Array.from(model.watches, ([sourceID, watch]) => watchRow(sourceID, watch))
    const row: ProjectionWatch = {
      ...watchRow(bystander.sourceID, { verified: "v1", updatedAt: 0, version: 0, createdAt: 0 }),
      ...bystander
    }
    for (const watch of [...seeded, row]) {
      expect(await this.ok(Effect.flatMap(WatchRepository, (w) => w.insert(watch)))).toBe(true)
    }
  }
  run<A, E>(effect: Effect.Effect<A, E, StoreServices>): Promise<Exit.Exit<A, E | PersistenceError>> {
    return this.runtime!.runPromiseExit(Effect.withClock(effect, clockFrom(() => this.model.now)))
  }

  async ok<A, E>(effect: Effect.Effect<A, E, StoreServices>): Promise<A> {
    const exit = await this.run(effect)
    if (Exit.isFailure(exit)) throw new Error(Cause.pretty(exit.cause))
    return exit.value
  }

  /** The call's outcome, or the tag (and a few fields) of the error it failed with. */
  async outcome<A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>): Promise<unknown> {
    const exit = await this.run(Effect.flatMap(ConnectorStore, use))
    if (Exit.isSuccess(exit)) return exit.value
    const error = Cause.squash(exit.cause) as { _tag?: string; state?: string }
    if (error._tag === undefined) throw new Error(Cause.pretty(exit.cause))
    return error.state === undefined ? { error: error._tag } : { error: error._tag, state: error.state }
  }

  async dispose(): Promise<void> {
    await this.runtime?.dispose()
  }
}

type Cmd = fc.AsyncCommand<Model, Real, false>
const always = () => true
const pick = <A>(items: ReadonlyArray<A>, index: number): A | undefined =>
  items.length === 0 ? undefined : items[index % items.length]

/** Where a call about candidates aims: the row's own run, or another (stale) run. */
const refOf = (m: Model, index: number, stale: number | null) => {
  const candidates = sortedSources(m.candidates)
  const sourceID = index < 6 && candidates.length > 0 ? pick(candidates, index)! : pick(ENTITIES, index)!
  const own = m.candidates.get(sourceID)?.runID ?? m.current()?.runID ?? "no-run"
  return { runID: stale === null ? own : pick(m.runIDs, stale) ?? own, sourceID }
}

/** The model's answer to a candidate call, before the candidate's own decision. */
const candidateGate = (m: Model, ref: { runID: string; sourceID: string }) => {
  const run = m.runs.get(ref.runID)
  if (run === undefined) return { answer: { error: "RelistRunNotFound" } }
  if (run.state !== "complete") return { answer: "stale-run" }
  const row = m.candidates.get(ref.sourceID)
  if (row === undefined || row.runID !== ref.runID) return { answer: { error: "SweepCandidateNotFound" } }
  return { row }
}

// ---------------------------------------------------------------------------
// Commands.

/** Time passes; the clock may also step back (no rule may order events by it). */
class Tick implements Cmd {
  constructor(readonly ms: number) {}
  check = always
  async run(m: Model) {
    m.now += this.ms
  }
  toString = () => `tick(${this.ms})`
}

class ProviderChange implements Cmd {
  constructor(readonly entity: number, readonly digest: string | null | "delete") {}
  check = always
  async run(m: Model) {
    const sourceID = ENTITIES[this.entity % ENTITIES.length]!
    if (this.digest === "delete") m.provider.delete(sourceID)
    else m.provider.set(sourceID, this.digest)
  }
  toString = () => `provider(${ENTITIES[this.entity % ENTITIES.length]} ${this.digest})`
}

/** A write-back tracks an entity (new watch), or a verifier settles one again (watch rewritten). */
class TouchWatch implements Cmd {
  constructor(readonly entity: number, readonly digest: string | null) {}
  check = always
  async run(m: Model, r: Real) {
    const sourceID = ENTITIES[this.entity % ENTITIES.length]!
    const old = m.watches.get(sourceID)
    const watch: MWatch = {
      verified: this.digest,
      updatedAt: m.now,
      version: old === undefined ? 0 : old.version + 1,
      createdAt: old?.createdAt ?? m.now
    }
    const row = watchRow(sourceID, watch)
    expect(await r.ok(Effect.flatMap(WatchRepository, (w) => old === undefined ? w.insert(row) : w.update(watchRow(sourceID, old), row))))
      .toBe(true)
    m.watches.set(sourceID, watch)
  }
  toString = () => `watch(${ENTITIES[this.entity % ENTITIES.length]} ${this.digest})`
}

class StartRun implements Cmd {
  check = always
  async run(m: Model, r: Real) {
    const started = await r.outcome((s) => s.startRelistRun(scope)) as RelistRun
    expect(started).toMatchObject({ ...scope, state: "started", pagesCommitted: 0, cursor: null, startedAt: m.now })
    const previous = m.current()
    if (previous !== undefined) Object.assign(previous, { state: "superseded", endedAt: m.now, updatedAt: m.now })
    const listing = sortedSources(m.provider).map((sourceID) => [sourceID, m.provider.get(sourceID)!] as const)
    m.runs.set(started.runID, {
      runID: started.runID,
      state: "started",
      cursor: null,
      pagesCommitted: 0,
      startedAt: m.now,
      updatedAt: m.now,
      completedAt: null,
      endedAt: null,
      counts: null,
      receipts: new Map(),
      listing,
      baseline: new Map(Array.from(m.watches, ([sourceID, w]) => [sourceID, { version: w.version, createdAt: w.createdAt }]))
    })
    m.runIDs.push(started.runID)
    m.runners.push({ runID: started.runID, page: 1, offset: 0 })
  }
  toString = () => "start"
}

/** A runner lists its next page and commits it (receipts and cursor; the last page completes the run). */
class CommitPage implements Cmd {
  constructor(readonly runner: number, readonly receiptsOnly: boolean) {}
  check = (m: Readonly<Model>) => m.runners.length > 0
  async run(m: Model, r: Real) {
    // Mostly the newest runner goes on; now and then an older (maybe stale) one.
    const runner = pick(m.runners, this.runner < 5 ? m.runners.length - 1 : this.runner)!
    const run = m.runs.get(runner.runID)
    const listing = run?.listing ?? []
    const page = listing.slice(runner.offset, runner.offset + PAGE).map(([sourceID, digest]) => ({ sourceID, digest }))
    const next = runner.offset + PAGE
    const last = next >= listing.length
    const receive = () => {
      for (const receipt of page) run!.receipts.set(receipt.sourceID, { digest: receipt.digest, seenAt: m.now })
    }
    if (this.receiptsOnly) {
      const got = await r.outcome((s) => s.recordRelistReceipt(runner.runID, page))
      const expected = run === undefined ? { error: "RelistRunNotFound" } : ["started", "listing"].includes(run.state) ? "recorded" : "stale-run"
      expect(got).toEqual(expected)
      if (expected === "recorded") receive()
      return
    }
    const got = await r.outcome((s) =>
      s.commitSweepCheckpoint(runner.runID, {
        page: runner.page,
        cursor: last ? null : String(next),
        receipts: page,
        complete: last
      }))
    const expected = run === undefined
      ? { error: "RelistRunNotFound" }
      : !["started", "listing"].includes(run.state)
      ? "stale-run"
      : runner.page !== run.pagesCommitted + 1
      ? "stale-page"
      : last
      ? "completed"
      : "committed"
    expect(got).toEqual(expected)
    if (expected !== "committed" && expected !== "completed") return
    receive()
    Object.assign(run!, { pagesCommitted: runner.page, updatedAt: m.now, cursor: last ? null : String(next) })
    runner.page++
    runner.offset = next
    if (last) {
      Object.assign(run!, { state: "complete", completedAt: m.now })
      complete(m, run!)
    } else run!.state = "listing"
  }
  toString = () => `${this.receiptsOnly ? "receipts" : "commit"}(runner ${this.runner})`
}

/** A runner crashes; optionally another process resumes the scope's run from its checkpoint. */
class CrashAndResume implements Cmd {
  constructor(readonly runner: number, readonly resume: boolean) {}
  check = always
  async run(m: Model, r: Real) {
    if (m.runners.length > 0) m.runners.splice(this.runner % m.runners.length, 1)
    if (!this.resume) return
    const checkpoint = await r.ok(Effect.flatMap(ConnectorStore, (s) => s.getSweepCheckpoint(scope)))
    const current = m.current()
    expect(Option.getOrUndefined(checkpoint)?.runID).toBe(current?.runID)
    if (current === undefined || Option.isNone(checkpoint)) return
    expect(checkpoint.value).toMatchObject({ state: current.state, cursor: current.cursor, pagesCommitted: current.pagesCommitted })
    if (current.state === "complete") return
    const offset = checkpoint.value.cursor === null ? 0 : Number(checkpoint.value.cursor)
    m.runners.push({ runID: current.runID, page: checkpoint.value.pagesCommitted + 1, offset })
  }
  toString = () => `crash(runner ${this.runner})${this.resume ? "+resume" : ""}`
}

/** A second runner for the same run and page: the two race for it. */
class Fork implements Cmd {
  constructor(readonly runner: number) {}
  check = (m: Readonly<Model>) => m.runners.length > 0
  async run(m: Model) {
    m.runners.push({ ...pick(m.runners, this.runner)! })
  }
  toString = () => `fork(runner ${this.runner})`
}

class Abandon implements Cmd {
  constructor(readonly run_: number) {}
  check = (m: Readonly<Model>) => m.runIDs.length > 0
  async run(m: Model, r: Real) {
    const runID = pick(m.runIDs, this.run_)!
    const run = m.runs.get(runID)
    const got = await r.outcome((s) => s.abandonRelistRun(runID))
    if (run === undefined) return expect(got).toEqual({ error: "RelistRunNotFound" })
    const current = ["started", "listing", "complete"].includes(run.state)
    expect(got).toBe(current ? "abandoned" : "already-ended")
    if (current) Object.assign(run, { state: "abandoned", endedAt: m.now, updatedAt: m.now })
  }
  toString = () => `abandon(run ${this.run_})`
}

const FRACTIONS = [[0, 1], [1, 4], [1, 2]] as const

class ListCandidates implements Cmd {
  constructor(readonly run_: number, readonly limit: number | null, readonly accept: boolean) {}
  check = (m: Readonly<Model>) => m.runIDs.length > 0
  async run(m: Model, r: Real) {
    const runID = pick(m.runIDs, this.run_)!
    const run = m.runs.get(runID)
    const fraction = this.limit === null ? undefined : FRACTIONS[this.limit % FRACTIONS.length]!
    const options = {
      limit: 3,
      ...(fraction === undefined ? {} : { maxDeletionFraction: fraction[0] / fraction[1], acceptDeletionsBeyondLimit: this.accept })
    }
    const pages: Array<SweepCandidate> = []
    let got: unknown
    for (;;) {
      got = await r.outcome((s) => s.listSweepCandidates(runID, { ...options, after: pages.at(-1)?.sourceID }))
      if (!Array.isArray(got)) break
      pages.push(...got)
      if (got.length < 3) {
        got = pages
        break
      }
    }
    if (run === undefined) return expect(got).toEqual({ error: "RelistRunNotFound" })
    if (run.state !== "complete") return expect(got).toEqual({ error: "RelistRunNotComplete", state: run.state })
    const { deletions, tracked } = run.counts!
    // The caller's limit, or the documented default: half, once two or more were tracked.
    const held = fraction ?? (tracked >= 2 ? [1, 2] as const : undefined)
    const accepted = fraction !== undefined && this.accept
    if (held !== undefined && !accepted && deletions * held[1] > held[0] * tracked) {
      return expect(got).toEqual({ error: "DeletionLimitExceeded" })
    }
    const expected = sortedSources(m.candidates).filter((sourceID) => {
      const row = m.candidates.get(sourceID)!
      return row.runID === runID && (row.status === "open" || row.status === "decided") && !withdrawn(m, row, sourceID)
    })
    expect((got as ReadonlyArray<SweepCandidate>).map((c) => [c.sourceID, c.kind, c.status]))
      .toEqual(expected.map((sourceID) => [sourceID, m.candidates.get(sourceID)!.kind, m.candidates.get(sourceID)!.status]))
    for (const c of got as ReadonlyArray<SweepCandidate>) {
      if (c.kind === "deleted") expect(run.receipts.has(c.sourceID)).toBe(false)
    }
  }
  toString = () => `list(run ${this.run_}${this.limit === null ? "" : ` limit ${FRACTIONS[this.limit % 3]!.join("/")}${this.accept ? " accepted" : ""}`})`
}

class Decide implements Cmd {
  constructor(readonly candidate: number, readonly stale: number | null, readonly outcome: SweepOutcome) {}
  check = (m: Readonly<Model>) => m.candidates.size > 0
  async run(m: Model, r: Real) {
    const ref = refOf(m, this.candidate, this.stale)
    const got = await r.outcome((s) => s.recordSweepOutcome(ref, this.outcome))
    const { answer, row } = candidateGate(m, ref)
    if (row === undefined) return expect(got).toEqual(answer)
    if (row.status === "given_up") return expect(got).toBe("given-up")
    if (row.status === "applied" || row.status === "kept") return expect(got).toBe("settled")
    if (withdrawn(m, row, ref.sourceID)) return expect(got).toEqual({ error: "SweepCandidateWithdrawn" })
    if (this.outcome === "delete_local" && row.kind !== "deleted") return expect(got).toEqual({ error: "SweepOutcomeNotAllowed" })
    expect(got).toBe("recorded")
    Object.assign(row, { outcome: this.outcome, status: this.outcome === "keep" ? "kept" : "decided" })
  }
  toString = () => `decide(${this.candidate}${this.stale === null ? "" : ` via run ${this.stale}`} ${this.outcome})`
}

/**
 * An apply worker: `failures` failed attempts in a row (each reported), then
 * one that succeeds (marked applied). Enough failures give the candidate up,
 * and the final apply must then be refused.
 */
class Apply implements Cmd {
  constructor(
    readonly candidate: number,
    readonly stale: number | null,
    readonly failures: number,
    /** A decision the worker records first, if any. */
    readonly decision: SweepOutcome | null
  ) {}
  check = (m: Readonly<Model>) => m.candidates.size > 0
  async run(m: Model, r: Real) {
    if (this.decision !== null) await new Decide(this.candidate, this.stale, this.decision).run(m, r)
    const ref = refOf(m, this.candidate, this.stale)
    for (let attempt = 0; attempt <= this.failures; attempt++) await this.attempt(m, r, ref, attempt < this.failures)
  }
  private async attempt(m: Model, r: Real, ref: { runID: string; sourceID: string }, fails: boolean) {
    const identity = { ...scope, sourceID: ref.sourceID }
    const before = await r.ok(Effect.flatMap(ConnectorStore, (s) => s.getSweepCandidate(identity)))
    const got = await r.outcome((s) =>
      fails ? s.recordSweepApplyFailure(ref, { kind: "network", message: `at ${m.now}` }) : s.markSweepCandidateApplied(ref))
    // The invariant on the store itself, whatever the model says: a given-up
    // candidate is never applied, and never counts another attempt.
    if (Option.isSome(before) && before.value.status === "given_up") {
      const after = Option.getOrThrow(await r.ok(Effect.flatMap(ConnectorStore, (s) => s.getSweepCandidate(identity))))
      expect([after.status, after.applyAttempts]).toEqual(["given_up", before.value.applyAttempts])
    }
    const { answer, row } = candidateGate(m, ref)
    if (row === undefined) return expect(got).toEqual(answer)
    const settled = { given_up: "given-up", open: "undecided", kept: "kept", applied: "applied" } as const
    const acting = row.status === "open" || row.status === "decided"
    if (!fails && acting && withdrawn(m, row, ref.sourceID)) return expect(got).toEqual({ error: "SweepCandidateWithdrawn" })
    if (row.status !== "decided") return expect(got).toBe(settled[row.status])
    if (!fails) {
      expect(got).toBe("applied")
      row.status = "applied"
      return
    }
    row.attempts++
    row.lastError = ["network", `at ${m.now}`]
    if (row.attempts >= SWEEP_APPLY_ATTEMPTS) row.status = "given_up"
    expect(got).toBe(row.status === "given_up" ? "given-up" : "retry")
  }
  toString = () =>
    `${this.decision === null ? "" : `${this.decision}+`}apply(${this.candidate}${
      this.stale === null ? "" : ` via run ${this.stale}`
    } after ${this.failures} failures)`
}

class Rearm implements Cmd {
  constructor(readonly candidate: number) {}
  check = (m: Readonly<Model>) => m.candidates.size > 0
  async run(m: Model, r: Real) {
    const { sourceID } = refOf(m, this.candidate, null)
    const got = await r.outcome((s) => s.rearmSweepCandidate({ ...scope, sourceID }))
    const row = m.candidates.get(sourceID)
    if (row === undefined) return expect(got).toEqual({ error: "SweepCandidateNotFound" })
    expect(got).toBe(row.status === "given_up" ? "rearmed" : "not-given-up")
    if (row.status === "given_up") Object.assign(row, { status: "open", outcome: null, attempts: 0 })
  }
  toString = () => `rearm(${this.candidate})`
}

class Collect implements Cmd {
  constructor(readonly age: number, readonly limit: number) {}
  check = always
  async run(m: Model, r: Real) {
    const before = m.now + 1 - this.age
    const got = await r.outcome((s) => s.collectRelistRuns({ before, limit: this.limit }))
    const doomed = Array.from(m.runs.values())
      .filter((run) => (run.state === "abandoned" || run.state === "superseded") && run.updatedAt < before)
      .sort((a, b) => a.updatedAt - b.updatedAt || (a.runID < b.runID ? -1 : 1))
      .slice(0, this.limit)
    expect(got).toBe(doomed.length)
    for (const run of doomed) {
      m.runs.delete(run.runID)
      for (const [sourceID, row] of m.candidates) {
        if (row.runID === run.runID && row.status !== "given_up") m.candidates.delete(sourceID)
      }
    }
  }
  toString = () => `collect(before now+1-${this.age}, limit ${this.limit})`
}

const index = fc.nat({ max: 7 })
/** Now and then a call names another run than the candidate's own. */
const stale = fc.oneof({ arbitrary: fc.constant(null), weight: 5 }, { arbitrary: index, weight: 1 })
/** Each command arbitrary as often as its weight: runs must get far enough to complete and give up. */
const weighted = (weight: number, arb: fc.Arbitrary<Cmd>): ReadonlyArray<fc.Arbitrary<Cmd>> => Array.from({ length: weight }, () => arb)
const commands = fc.commands<Model, Real, false>([
  ...weighted(1, fc.integer({ min: -3, max: 3 }).map((ms) => new Tick(ms))),
  ...weighted(1, fc.tuple(index, fc.constantFrom<string | null | "delete">("v1", "v2", "v3", null, "delete"))
    .map(([e, d]) => new ProviderChange(e, d))),
  ...weighted(1, fc.tuple(index, fc.constantFrom("v1", "v2", "v3", null)).map(([e, d]) => new TouchWatch(e, d))),
  ...weighted(1, fc.constant(new StartRun())),
  ...weighted(8, fc.tuple(index, fc.boolean(), fc.boolean()).map(([runner, a, b]) => new CommitPage(runner, a && b))),
  ...weighted(1, fc.tuple(index, fc.boolean()).map(([runner, resume]) => new CrashAndResume(runner, resume))),
  ...weighted(2, index.map((runner) => new Fork(runner))),
  ...weighted(1, index.map((run) => new Abandon(run))),
  ...weighted(2, fc.tuple(index, fc.option(index, { nil: null }), fc.boolean())
    .map(([run, limit, accept]) => new ListCandidates(run, limit, accept))),
  ...weighted(4, fc.tuple(index, stale, fc.constantFrom<SweepOutcome>("delete_local", "delete_local", "reingest", "reingest", "keep"))
    .map(([c, via, outcome]) => new Decide(c, via, outcome))),
  ...weighted(5, fc.tuple(
    index,
    stale,
    // Often enough failures to give up (the cap is 5), or more.
    fc.constantFrom(0, 1, 3, SWEEP_APPLY_ATTEMPTS, SWEEP_APPLY_ATTEMPTS, SWEEP_APPLY_ATTEMPTS + 1),
    fc.constantFrom<SweepOutcome | null>(null, "reingest", "reingest", "delete_local")
  ).map(([c, via, failures, decision]) => new Apply(c, via, failures, decision))),
  ...weighted(1, index.map((c) => new Rearm(c))),
  ...weighted(2, fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 1, max: 3 })).map(([age, limit]) => new Collect(age, limit)))
], commandsConstraints(60))

/** Every run, receipt and candidate the store holds agrees with the model, and the sweep's invariants hold on the store. */
const expectAgreement = async (m: Model, r: Real) => {
  await r.ok(Effect.gen(function*() {
    const store = yield* ConnectorStore
    for (const runID of m.runIDs) {
      const run = m.runs.get(runID)
      const stored = Option.getOrUndefined(yield* store.getRelistRun(runID))
      if (run === undefined) {
        expect(stored).toBeUndefined()
        continue
      }
      expect(stored).toEqual({
        ...scope,
        runID,
        state: run.state,
        cursor: run.cursor,
        pagesCommitted: run.pagesCommitted,
        receiptCount: run.counts?.receipts ?? null,
        trackedCount: run.counts?.tracked ?? null,
        deletionCount: run.counts?.deletions ?? null,
        divergenceCount: run.counts?.divergences ?? null,
        version: stored!.version,
        startedAt: run.startedAt,
        updatedAt: run.updatedAt,
        completedAt: run.completedAt,
        endedAt: run.endedAt
      })
      const receipts = yield* store.listSweepReceipts(runID, { limit: 100 })
      expect(receipts.map((x) => [x.sourceID, x.digest, x.seenAt]))
        .toEqual(sortedSources(run.receipts).map((s) => [s, run.receipts.get(s)!.digest, run.receipts.get(s)!.seenAt]))
    }
    for (const sourceID of ENTITIES) {
      const row = m.candidates.get(sourceID)
      const stored = Option.getOrUndefined(yield* store.getSweepCandidate({ ...scope, sourceID }))
      expect(stored === undefined ? undefined : {
        runID: stored.runID,
        kind: stored.kind,
        providerDigest: stored.providerDigest,
        localDigest: stored.localDigest,
        status: stored.status,
        outcome: stored.outcome,
        attempts: stored.applyAttempts,
        lastError: stored.lastErrorKind === null ? null : [stored.lastErrorKind, stored.lastErrorMessage]
      }, sourceID).toEqual(row)
      if (stored === undefined) continue
      // The invariants, on the store itself.
      expect(stored.applyAttempts).toBeLessThanOrEqual(SWEEP_APPLY_ATTEMPTS)
      const run = Option.getOrUndefined(yield* store.getRelistRun(stored.runID))
      if (run !== undefined) {
        expect(run.completedAt, "a candidate only ever comes from a run that completed").not.toBeNull()
        const seen = yield* store.listSweepReceipts(run.runID, { limit: 100 })
        if (stored.kind === "deleted") expect(seen.map((x) => x.sourceID)).not.toContain(sourceID)
      }
    }
    expect(Option.isNone(yield* store.getSweepCandidate({ ...bystander }))).toBe(true)
    const givenUp = yield* store.listGivenUpSweepCandidates(scope, { limit: 100 })
    expect(givenUp.map((c) => c.sourceID)).toEqual(sortedSources(m.candidates).filter((s) => m.candidates.get(s)!.status === "given_up"))
  }))
}

describe("the relist sweep agrees with a plain model", () => {
  for (const adapter of adapters) {
    it(`${adapter.name}: crashes, resumes, racing and stale runners, decisions, failures, give-ups, retention`, async () => {
      const real = new Real(adapter)
      try {
        await fc.assert(
          fc.asyncProperty(commands, async (cmds) => {
            const model = new Model()
            await real.fresh(model)
            await fc.asyncModelRun(() => ({ model, real }), cmds)
            await expectAgreement(model, real)
          }),
          modelParameters()
        )
      } finally {
        await real.dispose()
      }
    }, 900_000)
  }
})
