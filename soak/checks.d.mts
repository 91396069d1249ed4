/** One request in the provider's ledger. */
export interface LedgerEntry {
  readonly t: number
  readonly key: string
  readonly token?: string | null
  readonly worker?: string
  readonly op?: string
  readonly reissue?: string | null
  readonly ifMatch?: string | null
  readonly providerID?: string | null
  readonly status: number
  readonly applied: boolean
  readonly fault?: string | null
  readonly late?: boolean
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
}
/** The verdict: the offending keys (or messages) per check. */
export interface Verdict {
  readonly violations: Readonly<Record<"duplicates" | "lost" | "stuck" | "misreported" | "untyped" | "busy" | "integrity", ReadonlyArray<string>>>
  readonly details: Readonly<Record<string, ReadonlyArray<string>>>
}
export declare const readLines: (path: string) => Array<Record<string, unknown>>
export declare const judge: (facts: RunFacts) => Verdict
export declare const failed: (verdict: Verdict) => boolean
