import type { ClaimOperationInput, ConnectorOperation, ProjectionWatch, PromiseConnectorStore, WatchIdentity } from "@connector-store/core"
import {
  type FakeProvider,
  type Interleaving,
  type InvariantViolation,
  keyOf,
  type SeenLease,
  type SeenLimit,
  type SeenRefusal,
  type SeenRelease
} from "@connector-store/testkit"

/** The one relist scope and watch party every run uses; every document goes out through its account, except under limits. */
export const SCOPE = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" } as const

/** The owner, connector, model and provider account a write-back goes out through. */
export type Account = Pick<ClaimOperationInput, "ownerDID" | "connectorName" | "model" | "accountKey">

/** The caller every write-back of a run comes from. */
export const CALLER = "did:caller:1"

/** The store's policy in every run: short times, so lapses and limits happen within a schedule. */
export const POLICY = {
  leaseMs: 1_000,
  maxAttempts: 3,
  backoff: { baseDelayMs: 100, maxDelayMs: 400, jitter: "equal" as const },
  deferMs: 500
}

/** The start of every run's clock. */
export const START = 1_700_000_000_000

/** A local document: its content revision, the provider entity it is bound to, whether the sweep deleted it. */
export interface LocalDocument {
  readonly id: string
  winner: string
  rev: number
  source: string
  deleted: boolean
}

/** What the suite knows happened, in the order it happened (ground truth for the checks). */
export interface Knowledge {
  /** Idempotency keys some claim answered for, or that reached the provider. */
  readonly knownKeys: Set<string>
  /** The newest version of each operation any answer or snapshot showed. */
  readonly latestRow: Map<string, ConnectorOperation>
  /** Keys a retention call removed, with the call that did. */
  readonly collected: Map<string, string>
  /** Keys claimed again after retention collected their row: new operations, outside their idempotency window. */
  readonly replayedAfterRetention: Set<string>
  /** Per key, the runners between deciding to send it (before its mark) and the provider's answer: a request they may still send. */
  readonly sending: Map<string, number>
  /** Verifications in flight (claim granted, not yet recorded), by document. */
  readonly verifying: Set<{ readonly documentID: string }>
  /** Per watch generation (`watchGenerationKey`), the winners current when a verifier's claim was granted. */
  readonly claimedAgainst: Map<string, Set<string>>
  /** Winners an ingress brought in, per document. */
  readonly ingressWinners: Map<string, Set<string>>
  /** A counter of ground-truth events; commits, run starts and the ends of store calls' spans are stamped with it. */
  seq: number
  /** Per document, the event number of its last committed write-back (finalize or settle). */
  readonly lastCommit: Map<string, number>
  /** Per relist run, the event number at which it started. */
  readonly runStarted: Map<string, number>
  /** Violations found while the schedule ran, each with the trace line it happened at. */
  readonly violations: Array<InvariantViolation>
  /** Leases granted and ended, limits set and claims they refused, each with its call's span on `seq` (the limit judges' `LimitHistory`). */
  readonly limits: {
    readonly leases: Array<SeenLease>
    readonly releases: Array<SeenRelease>
    readonly limits: Array<SeenLimit>
    readonly refusals: Array<SeenRefusal>
  }
}

/** How the actors' runners behave (the suite's own loop, or a deliberately broken one for sensitivity checks). */
export interface RunnerFlavour {
  /** Sends plainly whatever the claim's reissue says (a runner that re-sends blind). */
  readonly ignoresReissue: boolean
  /** Claims through a store opened without `providerLimits` while limits are set (a fleet that does not enforce them). */
  readonly ignoresLimits: boolean
}

/** Everything an actor works with. */
export interface World {
  readonly store: PromiseConnectorStore<unknown>
  readonly il: Interleaving
  readonly provider: FakeProvider
  readonly documents: Map<string, LocalDocument>
  readonly clock: { now: number }
  readonly know: Knowledge
  readonly flavour: RunnerFlavour
  /** The account a document's write-backs go out through. */
  readonly accountOf: (documentID: string) => Account
  /** `maxAttempts` every verifier passes to `recordVerification`. */
  readonly verifyAttempts: number
  /** True when the relist applier checks at the provider before deleting (the docs' advice, and more). */
  readonly applierConfirms: boolean
  /** True when an ingress waits to move a winner until no verification of its document is in flight. */
  readonly ingressWaitsForVerifiers: boolean
}

/** A fresh record of what happened. */
export const emptyKnowledge = (): Knowledge => ({
  knownKeys: new Set(),
  latestRow: new Map(),
  collected: new Map(),
  replayedAfterRetention: new Set(),
  sending: new Map(),
  verifying: new Set(),
  claimedAgainst: new Map(),
  ingressWinners: new Map(),
  seq: 0,
  lastCommit: new Map(),
  runStarted: new Map(),
  violations: [],
  limits: { leases: [], releases: [], limits: [], refusals: [] }
})

/** Keeps the newest version of a row the suite has seen. */
export const observe = (know: Knowledge, row: ConnectorOperation | null | undefined): void => {
  if (row === null || row === undefined) return
  const key = keyOf(row)
  const seen = know.latestRow.get(key)
  if (seen === undefined || seen.version <= row.version) know.latestRow.set(key, row)
}

/** The identity part of a watch. */
export const identityOf = (w: WatchIdentity): WatchIdentity => ({
  ownerDID: w.ownerDID,
  connectorName: w.connectorName,
  model: w.model,
  accountKey: w.accountKey,
  sourceID: w.sourceID
})

/** The watch identity of a source in the run's scope. */
export const watchOf = (sourceID: string): WatchIdentity => ({ ...SCOPE, sourceID })

/** Every operation row (operator list, all pages). */
export const allOperations = async (store: PromiseConnectorStore<unknown>): Promise<ReadonlyArray<ConnectorOperation>> => {
  const out: Array<ConnectorOperation> = []
  let cursor: string | undefined
  for (;;) {
    const page = await store.listOperations({ limit: 500, cursor })
    out.push(...page.items)
    if (page.nextCursor === null) return out
    cursor = page.nextCursor
  }
}

/** Every watch row (operator list, all pages). */
export const allWatches = async (store: PromiseConnectorStore<unknown>): Promise<ReadonlyArray<ProjectionWatch>> => {
  const out: Array<ProjectionWatch> = []
  let cursor: string | undefined
  for (;;) {
    const page = await store.listWatches({ limit: 500, cursor })
    out.push(...page.items)
    if (page.nextCursor === null) return out
    cursor = page.nextCursor
  }
}
