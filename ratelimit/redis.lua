-- Rate-limit decisions of one Store.Decide call (see redis.go), atomic.
--
-- KEYS[i] is the key of check i. ARGV[1] is the grace added to every TTL,
-- in ms; then, per check, the algorithm's name and its arguments:
--
--   f (fixed_window):   hits, cap, capacity, ttl_ms
--   w (sliding_window): hits, cap, window_start_s, unit_s, weight_num, weight_den, ttl_ms
--   l (sliding_log):    hits, cap, capacity, now_ns, cutoff_ns, unit_ms
--   g (token/leaky):    admissible (0|1), now_s, now_ns, span_s, span_ns, cap_s, cap_ns
--
-- Times are never read from Redis (TIME): the caller's clock decides.
-- Lua numbers are doubles, exact for integers below 2^53: Unix times in
-- ns are not, so they are kept as (seconds, nanoseconds) pairs or as
-- 19-digit strings. Every write sets a TTL (in ms) after which the key
-- holds no usage.
--
-- The reply has, per check, the key's state before the check, from
-- which the caller computes the result with the same arithmetic:
--
--   f: count
--   w: window_start_s, count, previous_count (all 0 for a new key)
--   l: entries after dropping expired ones, last entry, entry d1, entry d2
--      (entries as ns strings, "" when absent; d1 and d2 as in the code)
--   g: tat_s, tat_ns (0, 0 for a new key)

local grace = tonumber(ARGV[1])
local E9 = 1000000000

local function pexpire_set(key, value, ttl)
  redis.call('SET', key, value, 'PX', math.max(math.ceil(ttl), 1) + grace)
end

local function fixed(key, o)
  local hits, cap, capacity = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  if hits == 0 then
    return tonumber(redis.call('GET', key) or '0') or 0, 0, 0, 0
  end
  -- One INCRBY in the common case; undone when the check is refused
  -- without counting. The TTL (the window's end) is set when the key is
  -- created and INCRBY keeps it.
  local after = redis.call('INCRBY', key, hits)
  local count = after - hits
  if after <= cap or (after > capacity and cap >= capacity) then
    if count == 0 then
      redis.call('PEXPIRE', key, math.max(math.ceil(tonumber(ARGV[o + 4])), 1) + grace)
    end
  elseif count == 0 then
    redis.call('DEL', key)
  else
    redis.call('DECRBY', key, hits)
  end
  return count, 0, 0, 0
end

local function window(key, o)
  local hits, cap, ws, us = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  local num, den = tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6])
  local start, count, prev = 0, 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, c, p = string.match(v, '^(%-?%d+) (%d+) (%d+)$')
    if s then start, count, prev = tonumber(s), tonumber(c), tonumber(p) end
  end
  local cur, old = count, prev
  if start == ws - us then
    cur, old = 0, count
  elseif start ~= ws then
    cur, old = 0, 0
  end
  local est = old * num / den + cur
  if hits > 0 and est + hits <= cap then
    pexpire_set(key, string.format('%d %d %d', ws, cur + hits, old), tonumber(ARGV[o + 7]))
  end
  return start, count, prev, 0
end

-- le compares two 19-digit ns strings numerically, exactly.
local function le(x, y)
  local xs, ys = tonumber(string.sub(x, 1, 10)), tonumber(string.sub(y, 1, 10))
  if xs ~= ys then return xs < ys end
  return tonumber(string.sub(x, 11)) <= tonumber(string.sub(y, 11))
end

local function log(key, o)
  local hits, cap, capacity = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local now, cutoff = ARGV[o + 4], ARGV[o + 5]
  local drop = 0
  while true do
    local head = redis.call('LRANGE', key, drop, drop + 63)
    local i = 1
    while i <= #head and le(head[i], cutoff) do i = i + 1 end
    drop = drop + i - 1
    if i <= #head or #head == 0 then break end
  end
  if drop > 0 then redis.call('LTRIM', key, drop, -1) end
  local n = redis.call('LLEN', key)
  local last, e1, e2 = '', '', ''
  if n > 0 then last = redis.call('LINDEX', key, -1) end
  if n + hits <= cap then
    if hits > 0 then
      local at = now
      if last ~= '' and not le(last, now) then at = last end
      local batch = {}
      for i = 1, math.min(hits, 1000) do batch[i] = at end
      for left = hits, 1, -1000 do
        if left < 1000 then batch = {unpack(batch, 1, left)} end
        redis.call('RPUSH', key, unpack(batch))
      end
      local ahead = (tonumber(at) - tonumber(now)) / 1e6 -- clock went back: approximate ms is fine
      redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[o + 6]) + ahead) + grace)
    end
  else
    local d1, d2 = n + hits - cap, n + 1 - capacity
    if d1 >= 1 and d1 <= n then e1 = redis.call('LINDEX', key, d1 - 1) end
    if d2 >= 1 and d2 <= n then e2 = redis.call('LINDEX', key, d2 - 1) end
  end
  return n, last, e1, e2
end

-- norm carries or borrows so that ns is in [0, 1e9).
local function norm(s, ns)
  if ns >= E9 then return s + 1, ns - E9 end
  if ns < 0 then return s - 1, ns + E9 end
  return s, ns
end

local function gcra(key, o)
  local ok, ts, tn = ARGV[o + 1] == '1', tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local hs, hn, ks, kn = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6]), tonumber(ARGV[o + 7])
  local ss, sn = 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, n = string.match(v, '^(%-?%d+) (%d+)$')
    if s then ss, sn = tonumber(s), tonumber(n) end
  end
  local as, an = ss, sn -- tat = max(stored, now)
  if ss < ts or (ss == ts and sn < tn) then as, an = ts, tn end
  if ok and (hs > 0 or hn > 0) then
    local xs, xn = norm(as + hs, an + hn)  -- next tat
    local ds, dn = norm(xs - ts, xn - tn)  -- next - now
    if ds < ks or (ds == ks and dn <= kn) then
      pexpire_set(key, string.format('%d %d', xs, xn), ds * 1000 + dn / 1e6)
    end
  end
  return ss, sn, 0, 0
end

local algorithms = {f = fixed, w = window, l = log, g = gcra}
local nargs = {f = 4, w = 7, l = 6, g = 7}   -- arguments after the name
local nreply = {f = 1, w = 3, l = 4, g = 2}  -- reply values used
-- The functions read their arguments from ARGV after offset o (no table
-- per check) and return their reply values.
local keys, o = KEYS, 2
if ARGV[2] == 'k' then
  -- One run per cluster master (redis_cluster_node.go): ARGV[4] keys
  -- follow in ARGV (KEYS[1], the first, only routes the run), over
  -- several slots of this node, which the script's allow-cross-slot-keys
  -- flag permits. ARGV[3] is the id of the master it was planned for:
  -- redirected to another node (MOVED, or ASK, whose ASKING would let it
  -- touch keys of the importing slot that still live on the source), it
  -- runs nothing. Each key is read before anything is written: one that
  -- this node does not serve (its slot moved or moving) fails the run
  -- with no write made. Either way the caller runs the checks per slot.
  if redis.call('CLUSTER', 'MYID') ~= ARGV[3] then
    return redis.error_reply('NOTPLANNED node run reached another node')
  end
  local nk = tonumber(ARGV[4])
  keys, o = {}, 5 + nk
  for i = 1, nk do
    keys[i] = ARGV[4 + i]
    redis.call('EXISTS', keys[i])
  end
end
local out, n = {}, 0
for i = 1, #keys do
  local alg = ARGV[o]
  local r1, r2, r3, r4 = algorithms[alg](keys[i], o)
  local k = nreply[alg]
  out[n + 1] = r1
  if k > 1 then out[n + 2] = r2 end
  if k > 2 then out[n + 3] = r3 end
  if k > 3 then out[n + 4] = r4 end
  n, o = n + k, o + 1 + nargs[alg]
end
return out
