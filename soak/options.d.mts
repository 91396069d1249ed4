/** The soak's options. */
export interface SoakOptions {
  readonly backend: "sqlite" | "postgres"
  readonly seconds: number
  readonly workers: number
  readonly seed: number
  readonly keep: boolean
}
export declare const parseArgs: (argv: ReadonlyArray<string>) => SoakOptions
