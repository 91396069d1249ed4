const REMOVED: unique symbol = Symbol("removed")

/**
 * A transaction's view of one table: the committed rows under the changes
 * this transaction made. Creating it costs nothing whatever the table's
 * size, so a transaction pays for the rows it writes, not for the table
 * (copying the table per transaction made n writes cost O(n²)). Reads see
 * the changes; the committed rows stay untouched until `commitInto`.
 */
export class DraftTable<V> implements Map<string, V> {
  private readonly changes = new Map<string, V | typeof REMOVED>()

  constructor(private readonly base: ReadonlyMap<string, V>) {}

  get size(): number {
    let size = this.base.size
    for (const [key, value] of this.changes) {
      const before = this.base.has(key)
      if (value === REMOVED) {
        if (before) size--
      } else if (!before) size++
    }
    return size
  }

  get(key: string): V | undefined {
    const changed = this.changes.get(key)
    if (changed === REMOVED) return undefined
    return changed !== undefined || this.changes.has(key) ? changed as V : this.base.get(key)
  }

  has(key: string): boolean {
    return this.changes.has(key) ? this.changes.get(key) !== REMOVED : this.base.has(key)
  }

  set(key: string, value: V): this {
    this.changes.set(key, value)
    return this
  }

  delete(key: string): boolean {
    const had = this.has(key)
    if (had) this.changes.set(key, REMOVED)
    return had
  }

  clear(): void {
    for (const key of this.keys()) this.changes.set(key, REMOVED)
  }

  *entries(): MapIterator<[string, V]> {
    for (const [key, value] of this.base) {
      if (!this.changes.has(key)) yield [key, value]
    }
    for (const [key, value] of this.changes) {
      if (value !== REMOVED) yield [key, value]
    }
  }

  *keys(): MapIterator<string> {
    for (const [key] of this.entries()) yield key
  }

  *values(): MapIterator<V> {
    for (const [, value] of this.entries()) yield value
  }

  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries()
  }

  forEach(callback: (value: V, key: string, map: Map<string, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this)
  }

  get [Symbol.toStringTag](): string {
    return "DraftTable"
  }

  /** Applies the changes to `table` (the committed rows this draft was made over), all at once. */
  commitInto(table: Map<string, V>): void {
    for (const [key, value] of this.changes) {
      if (value === REMOVED) table.delete(key)
      else table.set(key, value)
    }
  }
}
