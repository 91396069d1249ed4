/** Every key of `T` as a list of names: a list that leaves one out does not compile (the error names it `missingOption`). */
export const allOptionNames = <T extends object>() =>
<const K extends ReadonlyArray<keyof T & string>>(
  names: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : { readonly missingOption: Exclude<keyof T, K[number]> })
): ReadonlyArray<string> => names

const editDistance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The name of `known` nearest to `name` (case aside), or `undefined` when none is within a third of its length. */
export const nearestName = (name: string, known: ReadonlyArray<string>): string | undefined => {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined
}

/**
 * The first own key of `value` not in `known` (even one set to `undefined`), with the reason it is refused naming the
 * nearest known one, or `undefined`.
 */
export const unknownKeyOf = (
  value: object,
  known: ReadonlyArray<string>,
  what: string
): { readonly key: string; readonly reason: string } | undefined => {
  for (const key of Object.keys(value)) {
    if (known.includes(key)) continue
    const nearest = nearestName(key, known)
    return {
      key,
      reason: nearest === undefined
        ? `is not ${what} (known: ${known.join(", ")})`
        : `is not ${what}; did you mean ${nearest}?`
    }
  }
  return undefined
}
