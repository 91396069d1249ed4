import {
  ConnectorStore,
  type JsonValue,
  type SyncLease,
  type SyncProgressCASCurrent,
  type SyncState
} from "@connector-store/core"
import { Effect, Exit, ManagedRuntime, Option } from "effect"
import fc from "fast-check"
import { expect } from "vitest"
import type { AdapterUnderTest } from "../support/stores.js"
import { appending, type InterferingStore, interferingStore, logOf, type OtherWriter } from "../support/syncstate.js"

/**
 * The sync-state model: a plain map from owner to row, where an incarnation
 * is a generation number and a checkpoint a list of tags. Far simpler than
 * the store: no stamps, no guards, just what each call must leave behind.
 */
export interface ModelRow {
  readonly generation: number
  readonly version: number
  readonly log: ReadonlyArray<string> | null
  readonly recovery: JsonValue
  readonly report: { readonly status: string; readonly lastSyncedAt: string; readonly entityCount: number }
  readonly lease: { readonly claim: number; readonly expiresAt: number } | null
}

/** The model of one run: rows by owner, the runners' claims, and the clock. */
export interface SyncModel {
  readonly rows: Map<string, ModelRow>
  /** The claim each runner last got, per owner (`runner/owner`). */
  readonly claims: Map<string, number>
  now: number
  generations: number
  claimCount: number
}

/** The owners a run works on (one connector per run). */
export const OWNERS = ["did:a", "did:b"] as const
/** The runners competing for leases. */
export const RUNNERS = ["r1", "r2"] as const
const BLANK = { status: "idle", lastSyncedAt: "", entityCount: 0 } as const

/** The model at the start of a run: no rows, no claims. */
export const emptyModel = (): SyncModel => ({ rows: new Map(), claims: new Map(), now: 1_000, generations: 0, claimCount: 0 })

const newRow = (m: SyncModel, patch: Partial<ModelRow>): ModelRow =>
  ({ generation: ++m.generations, version: 0, log: null, recovery: null, report: BLANK, lease: null, ...patch })

/** What a report write does in the model: keep stamp, lease and (unless given) checkpoint. */
export const modelSet = (m: SyncModel, owner: string, report: ModelRow["report"], log: ReadonlyArray<string> | undefined) => {
  const row = m.rows.get(owner)
  m.rows.set(
    owner,
    row === undefined ? newRow(m, { report, log: log ?? null }) : { ...row, report, log: log === undefined ? row.log : log }
  )
}

/** What a progress write computed from `read` does, if it lands. */
export const modelProgress = (m: SyncModel, owner: string, tag: string) => {
  const row = m.rows.get(owner)
  const log = [...(row?.log ?? []), tag]
  m.rows.set(
    owner,
    row === undefined
      ? newRow(m, { version: 1, log, recovery: { entries: log.length } })
      : { ...row, version: row.version + 1, log, recovery: { entries: log.length } }
  )
}

/** Another writer's change, landing between a progress attempt's read and its write. */
export type Interference =
  | { readonly kind: "progress"; readonly tag: string }
  | { readonly kind: "report" }
  | { readonly kind: "delete" }
  | { readonly kind: "recreate-by-set" }
  | { readonly kind: "recreate-by-progress"; readonly tag: string }

const OTHER_REPORT = { status: "syncing", lastSyncedAt: "other", entityCount: 5 } as const

/** Any one interfering writer. */
export const interferenceArbitrary: fc.Arbitrary<Interference> = fc.oneof(
  fc.constant({ kind: "progress", tag: "x" } as const),
  fc.constant({ kind: "report" } as const),
  fc.constant({ kind: "delete" } as const),
  fc.constant({ kind: "recreate-by-set" } as const),
  fc.constant({ kind: "recreate-by-progress", tag: "y" } as const)
)

/** An interfering writer's change, in the model. */
export const applyInterference = (m: SyncModel, owner: string, x: Interference) => {
  if (x.kind === "progress") modelProgress(m, owner, x.tag)
  if (x.kind === "report") modelSet(m, owner, OTHER_REPORT, undefined)
  if (x.kind === "delete" || x.kind.startsWith("recreate")) m.rows.delete(owner)
  if (x.kind === "recreate-by-set") modelSet(m, owner, OTHER_REPORT, undefined)
  if (x.kind === "recreate-by-progress") modelProgress(m, owner, x.tag)
}

const writerFor = (connector: string, owner: string, x: Interference): OtherWriter => (other) => {
  const report = other.setSyncState(connector, owner, OTHER_REPORT)
  const progress = (tag: string) => other.updateSyncProgress(connector, owner, appending(tag))
  const remove = other.deleteSyncState(connector, owner)
  switch (x.kind) {
    case "progress":
      return progress(x.tag)
    case "report":
      return report
    case "delete":
      return remove
    case "recreate-by-set":
      return Effect.zipRight(remove, report)
    case "recreate-by-progress":
      return Effect.zipRight(remove, progress(x.tag))
  }
}

/**
 * The system under test for a whole property: one interfering store of an
 * adapter; each run works under its own connector name, so runs never see
 * each other's rows.
 */
export class RealSyncStore {
  private readonly store: InterferingStore
  private readonly runtime: ManagedRuntime.ManagedRuntime<ConnectorStore, unknown>
  private runs = 0
  connector = ""
  /** The real incarnation of each model generation, learned when first seen. */
  readonly incarnations = new Map<number, string>()
  /** Each runner's last lease, per owner (`runner/owner`). */
  readonly leases = new Map<string, SyncLease>()

  constructor(adapter: AdapterUnderTest) {
    this.store = interferingStore(adapter)
    this.runtime = ManagedRuntime.make(this.store.layer)
  }

  fresh(): this {
    this.connector = `run-${++this.runs}`
    this.incarnations.clear()
    this.leases.clear()
    return this
  }

  run<A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>): Promise<Exit.Exit<A, E | unknown>> {
    return this.runtime.runPromiseExit(Effect.flatMap(ConnectorStore, use))
  }

  async get(owner: string): Promise<SyncState | undefined> {
    const exit = await this.run((s) => s.getSyncState(this.connector, owner))
    return Option.getOrUndefined(Exit.getOrElse(exit, () => expect.unreachable(`getSyncState failed: ${String(exit)}`)))
  }

  interfere(owner: string, xs: ReadonlyArray<Interference>): void {
    this.store.interfere(...xs.map((x) => writerFor(this.connector, owner, x)))
  }

  /** Drops the interference no read consumed; returns how much there was. */
  discardInterference(): number {
    return this.store.discard()
  }

  /** Asserts that `incarnation` is the one of `generation`, and of no other. */
  expectIncarnation(generation: number, incarnation: string | null | undefined): void {
    expect(typeof incarnation).toBe("string")
    const known = this.incarnations.get(generation)
    if (known !== undefined) return void expect(incarnation).toBe(known)
    expect([...this.incarnations.values()]).not.toContain(incarnation)
    this.incarnations.set(generation, incarnation!)
  }

  dispose(): Promise<void> {
    return this.runtime.dispose()
  }
}

/** Asserts that the store's row of `owner` is the model's. */
export const expectAgreement = async (m: SyncModel, r: RealSyncStore, owner: string): Promise<void> => {
  const row = m.rows.get(owner)
  const real = await r.get(owner)
  if (row === undefined) return void expect(real).toBeUndefined()
  expect(real).toBeDefined()
  expect({
    version: real!.version,
    checkpoint: real!.checkpoint,
    recovery: real!.recovery,
    report: { status: real!.status, lastSyncedAt: real!.lastSyncedAt, entityCount: real!.entityCount },
    leaseExpiresAt: real!.leaseExpiresAt
  }).toEqual({
    version: row.version,
    checkpoint: row.log === null ? null : { log: row.log },
    recovery: row.recovery,
    report: row.report,
    leaseExpiresAt: row.lease?.expiresAt ?? null
  })
  r.expectIncarnation(row.generation, real!.incarnation)
}

/** What a progress attempt read, in model terms. */
export interface ModelRead {
  readonly generation: number
  readonly version: number
  readonly log: ReadonlyArray<string> | null
}

/**
 * Asserts that a recompute was called with exactly the model's reads, in
 * order: same versions and checkpoints, and incarnations that match the
 * model's generations one to one.
 */
export const expectReads = (
  r: RealSyncStore,
  seen: ReadonlyArray<SyncProgressCASCurrent | null>,
  expected: ReadonlyArray<ModelRead | undefined>
): void => {
  expect(seen.map((current) => current === null ? undefined : {
    version: current.version,
    log: current.checkpoint === null ? null : logOf(current.checkpoint)
  })).toEqual(expected.map((read) => read === undefined ? undefined : { version: read.version, log: read.log }))
  seen.forEach((current, i) => {
    const read = expected[i]
    if (current !== null && read !== undefined) r.expectIncarnation(read.generation, current.incarnation)
  })
}
