/** The soak's options. */
export interface SoakOptions {
  readonly backend: "sqlite" | "postgres"
  readonly seconds: number
  readonly workers: number
  readonly seed: number
  readonly keep: boolean
  /** Fail unless at least this many workers were SIGKILLed (0: no minimum). */
  readonly minKills: number
  /** Postgres only: the run's own primary and streaming replica, the primary crashed and the replica promoted midway. */
  readonly failover: boolean
  /** With `failover`: the replica is the primary's synchronous standby (default: asynchronous). */
  readonly sync: boolean
}
export declare const parseArgs: (argv: ReadonlyArray<string>) => SoakOptions
