// Types of round-trips.mjs, for the test that pins the counts.
export interface RoundTripProxy {
  readonly port: number
  readonly roundTrips: () => number
  close(): Promise<void>
}
export declare const startRoundTripProxy: (target: { readonly host: string; readonly port: number }) => Promise<RoundTripProxy>
export declare const throughProxy: (url: string) => {
  readonly target: { readonly host: string; readonly port: number }
  readonly at: (port: number) => string
}
export declare const countSqliteStatements: () => () => number
export declare const ROUND_TRIP_METHODS: ReadonlyArray<string>
export declare const measureRoundTrips: (
  store: unknown,
  count: () => number,
  advance: (ms: number) => void,
  tag: string
) => Promise<Record<string, number>>
