import type { LedgerEntry as ModelEntry } from "@connector-store/testkit/provider"

/** One line of the provider's ledger file: the model's ledger entry and what the soak's transport adds. */
export interface LedgerEntry extends ModelEntry {
  /** When the request arrived (epoch ms). */
  readonly t: number
  /** The lease token of the run that sent it. */
  readonly token?: string | null
  /** How much of its run's lease was left when it arrived (negative: late by that much). */
  readonly leaseLeftMs?: number | null
  /** True when it arrived after its run's lease expired. */
  readonly pastLease?: boolean
  /** The soak's name for the fault it met, or null. */
  readonly fault?: string | null
}
/** One event a worker appended. */
export interface SoakEvent {
  readonly type: string
  readonly worker?: string
  readonly key?: string
  readonly what?: string
  readonly method?: string
  readonly text?: string
  readonly [other: string]: unknown
}
/** What `judge` reads. */
export interface RunFacts {
  readonly ledger: ReadonlyArray<LedgerEntry>
  readonly events: ReadonlyArray<SoakEvent>
  readonly rows: ReadonlyArray<{ readonly operation_id: string; readonly document_id: string | null; readonly state: string }>
  readonly missedBySweep: ReadonlyArray<string>
  readonly unsettled: ReadonlyArray<string>
  readonly writeStates: ReadonlyMap<string | null, string>
  readonly integrity: string | null
  /** A failover run's facts (absent otherwise). */
  readonly failover?: FailoverFacts | undefined
}
/** What a failover run adds to the facts. */
export interface FailoverFacts {
  readonly mode: "async" | "sync"
  /** The timeline the promoted server is on. */
  readonly timelineAfter: number
  /** When the primary was crashed (epoch ms). */
  readonly crashAt: number
  /** The store's `getStoreStatus().durability.failover` after the run. */
  readonly noticed: { readonly to: { readonly timeline: number | null } } | null
  /** The keys a claim answered or the provider saw before the crash that the promoted server lacked. */
  readonly forgotten: ReadonlyArray<string>
  /** The keys replayed on the promoted server (their rows were missing after the load). */
  readonly replayed: ReadonlyArray<string>
}
/** The verdict: the offending keys (or messages) per check. */
export interface Verdict {
  readonly violations: Readonly<Record<"duplicates" | "lost" | "stuck" | "misreported" | "untyped" | "busy" | "integrity" | "failover", ReadonlyArray<string>>>
  readonly details: Readonly<Record<string, ReadonlyArray<string>>>
  /** The keys the failover forgot: how many, how many the provider had applied before the crash, were replayed, still have no row. */
  readonly forgotten: { readonly keys: number; readonly applied: number; readonly replayed: number; readonly unreplayed: number }
}
export declare const readLines: (path: string) => Array<Record<string, unknown>>
export declare const judge: (facts: RunFacts) => Verdict
export declare const failed: (verdict: Verdict) => boolean
