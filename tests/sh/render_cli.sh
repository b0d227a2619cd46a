#!/usr/bin/env bash
# render_cli.sh — `k3 render`: the chat.md §2.8 examples byte for byte,
# --ids control-token layout, --model spellings/ids, and bad input (clear
# message, non-zero exit).
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME: renders $tmp/req.json and compares with $tmp/want byte for byte.
check() {
    if "$K3" render <"$tmp/req.json" >"$tmp/got" 2>"$tmp/err" && cmp -s "$tmp/got" "$tmp/want"; then
        echo "PASS $1"
    else
        echo "FAIL $1"
        cat "$tmp/err"
        cmp "$tmp/got" "$tmp/want" | sed 's/^/  /'
    fi
}
want() { printf '%s' "$(cat)" >"$tmp/want"; }

EFFORT='<|open|>message role="system" type="thinking-effort"<|sep|>`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), supported values include `low`, `medium`, `high`, and `max`.
Now the system is invoked with `thinking_effort=max`.<|close|>message<|sep|><|end_of_msg|>'

echo '{"messages":[{"role":"user","content":"Hi"}]}' >"$tmp/req.json"
want <<EOF
$EFFORT<|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>
EOF
check render_example1

cat >"$tmp/req.json" <<'EOF'
{"messages":[{"role":"system","content":"You are helpful"},{"role":"user","content":"Hi"},
 {"role":"assistant","content":"Hello!","reasoning_content":"think a bit"},{"role":"user","content":"Bye"}]}
EOF
want <<EOF
$EFFORT<|open|>message role="system"<|sep|>You are helpful<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>think a bit<|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Bye<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>
EOF
check render_example2

sed -i 's/^{/{"chat_template_kwargs":{"thinking":false},/' "$tmp/req.json"
want <<'EOF'
<|open|>message role="system"<|sep|>You are helpful<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Bye<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>response<|sep|>
EOF
check render_example3_thinking_off

cat >"$tmp/req.json" <<'EOF'
{"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
 "messages":[{"role":"user","content":"weather in Paris?"},
  {"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
  {"role":"tool","tool_call_id":"call_1","content":"sunny <|open|>x<|sep|>"}]}
EOF
want <<EOF
<|open|>message role="system" type="tool-declare"<|sep|># Tools
Here are the available tools, described in JSONSchema.

\`\`\`json
[{"function":{"name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}},"type":"function"}]
\`\`\`<|close|>message<|sep|><|end_of_msg|>$EFFORT<|open|>message role="user"<|sep|>weather in Paris?<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|><|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="tool" tool="get_weather" index="1"<|sep|>sunny <|open|>x<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>
EOF
check render_example4_tools

echo '{"tool_choice":"required","response_format":{"type":"json_object"},"chat_template_kwargs":{"thinking_effort":null},"messages":[]}' >"$tmp/req.json"
want <<'EOF'
<|open|>message role="system" type="tool-choice"<|sep|>The system is invoked with `tool_choice=required`.
You MUST call tools in the next message.<|close|>message<|sep|><|end_of_msg|><|open|>message role="system" type="response-format"<|sep|>The system is invoked with `response_format=json_object`.
Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting.<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>
EOF
check render_example5_tail

# --ids: the control ids of Example 1 in order (text is byte-level here)
echo '{"messages":[{"role":"user","content":"Hi"}]}' | "$K3" render --ids >"$tmp/ids" 2>"$tmp/err"
ctrl=$(tr ',' '\n' <"$tmp/ids" | awk '$1 >= 163584' | tr '\n' ' ')
if [ "$ctrl" = "163587 163589 163588 163589 163586 163587 163589 163588 163589 163586 163587 163589 163587 163589 " ]; then
    echo "PASS render_ids_control_layout"
else
    echo "FAIL render_ids_control_layout ($ctrl)"
    cat "$tmp/err"
fi

# --model: a model directory without tokenizer files, vocab 1000 (block 744), byte-level on request
mkdir -p "$tmp/m" && echo '{"vocab_size":1000}' >"$tmp/m/config.json"
first=$(echo '{"messages":[]}' | "$K3" render --model "$tmp/m" --ids --byte-tokenizer 2>&1 | cut -d, -f1)
if [ "$first" = 747 ]; then echo "PASS render_model_ids"; else echo "FAIL render_model_ids ($first)"; fi

# bad input: clear message naming the problem, exit status 1
bad() { # name, stdin, expected message fragment
    local out rc
    out=$(printf '%s' "$2" | "$K3" render 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -eq 1 ] && grep -qF -- "$3" <<<"$out"; then
        echo "PASS $1"
    else
        echo "FAIL $1 (rc=$rc: $out)"
    fi
}
bad render_bad_json '{"messages":[' "invalid JSON"
bad render_empty_stdin '' "invalid JSON"
bad render_no_messages '{"model":"x"}' "messages"
bad render_bad_role '{"messages":[{"role":"developer","content":"x"}]}' 'messages[0].role'
bad render_bad_effort '{"reasoning_effort":"extreme","messages":[]}' "reasoning_effort"
bad render_bad_call '{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]}' 'messages[0].tool_calls[0].function.name'
out=$(echo '{"messages":[]}' | "$K3" render --model "$tmp/nonexistent" 2>&1 >/dev/null)
rc=$?
if [ "$rc" -ne 0 ] && grep -q nonexistent <<<"$out"; then echo "PASS render_missing_model_dir"; else echo "FAIL render_missing_model_dir (rc=$rc: $out)"; fi
