import { Data } from "effect"

/**
 * The schema under `tablePrefix` carries migrations this version of
 * connector-store does not know (`unknown`): a newer version migrated it.
 * Nothing was written, and this version does not open it for writing (its
 * statements could break what the newer schema expects); a read-only open
 * still reads it. `databaseVersion` is the highest migration applied,
 * `codeVersion` the highest this version knows.
 */
export class StoreSchemaTooNew extends Data.TaggedError("StoreSchemaTooNew")<{
  readonly tablePrefix: string
  readonly databaseVersion: number
  readonly codeVersion: number
  readonly unknown: ReadonlyArray<number>
  readonly method?: string | undefined
}> {
  override get message(): string {
    const where = this.method === undefined ? "" : `${this.method}: `
    const plural = this.unknown.length === 1 ? "" : "s"
    const newer = this.databaseVersion > this.codeVersion ? ", newer than" : ", unlike"
    return `${where}the schema under prefix ${this.tablePrefix} is at migration ${this.databaseVersion}${newer} this ` +
      `connector-store (migration ${this.codeVersion}): it carries migration${plural} ${this.unknown.join(", ")} this version ` +
      "does not know, so it is not opened for writing; upgrade connector-store"
  }
}
