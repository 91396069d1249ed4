// The soak's command line: --backend sqlite|postgres, --minutes N or
// --seconds N, --workers W, --seed S, --keep (keep the run's files),
// --min-kills K (fail unless at least K workers were SIGKILLed: a short
// run on a loaded machine, where kills wait for a spare, still proves it
// survived that many), --failover (Postgres only: the soak's own primary and
// streaming replica, the primary crashed and the replica promoted midway;
// asynchronous unless --sync).

/** The options, with their defaults; an unknown or malformed option is an error naming it. */
export const parseArgs = (argv) => {
  const options = { backend: "sqlite", seconds: 60, workers: 4, seed: Math.floor(Math.random() * 2 ** 31), keep: false, minKills: 0, failover: false, sync: false }
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    const value = () => {
      const text = argv[++i]
      if (text === undefined) throw new Error(`${flag} needs a value`)
      return text
    }
    const positive = (text) => {
      const n = Number(text)
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number, got ${text}`)
      return n
    }
    switch (flag) {
      case "--backend": {
        options.backend = value()
        if (options.backend !== "sqlite" && options.backend !== "postgres") throw new Error("--backend must be sqlite or postgres")
        break
      }
      case "--minutes": options.seconds = positive(value()) * 60; break
      case "--seconds": options.seconds = positive(value()); break
      case "--workers": options.workers = Math.max(1, Math.round(positive(value()))); break
      case "--seed": options.seed = Math.round(positive(value())); break
      case "--keep": options.keep = true; break
      case "--min-kills": options.minKills = Math.round(positive(value())); break
      case "--failover": options.failover = true; break
      case "--sync": options.sync = true; break
      default: throw new Error(`unknown option ${flag}`)
    }
  }
  if (options.sync && !options.failover) throw new Error("--sync needs --failover")
  if (options.failover && options.backend !== "postgres") throw new Error("--failover needs --backend postgres")
  return options
}
