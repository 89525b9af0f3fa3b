-- Rebuilds the repeats by branch (hitb:<seq>:<branch>) of archival items
-- from their repeats (hits:<seq>), for runs written before write.lua kept
-- them: atomic per call, so a write applied meanwhile (which adds to both)
-- is counted once.
--
-- ARGV[1]  key prefix, "hpcq:{<run>}:"
-- ARGV[2..] item seqs
--
-- Returns the number of repeats indexed.
local p = ARGV[1]
local total = 0
for i = 2, #ARGV do
  local seq = ARGV[i]
  local state = {}
  for _, m in ipairs(redis.call('ZRANGE', p .. 'hits:' .. seq, 0, -1)) do
    local s, b, ts = string.match(m, '^(%d+)|(.*)|(%d+)$')
    if s then
      local key = p .. 'hitb:' .. seq .. ':' .. b
      local st = state[b]
      if st == nil then
        redis.call('DEL', key)
        st = {count = 0, last = 0}
        state[b] = st
      end
      st.count = st.count + 1
      st.last = math.max(st.last, tonumber(ts))
      redis.call('ZADD', key, s, s .. ':' .. st.count .. ':' .. string.format('%d', st.last))
      total = total + 1
    end
  end
end
return total
