/** The soak's options. */
export interface SoakOptions {
  readonly backend: "sqlite" | "postgres"
  readonly seconds: number
  readonly workers: number
  readonly seed: number
  readonly keep: boolean
  /** Fail unless at least this many workers were SIGKILLed (0: no minimum). */
  readonly minKills: number
}
export declare const parseArgs: (argv: ReadonlyArray<string>) => SoakOptions
