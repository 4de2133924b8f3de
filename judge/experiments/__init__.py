"""Experiments: the user's own RAG pipeline run over a test set, then judged.

`app` loads the pipeline (`module:function`, `file.py:function`, a framework object
through `adapters`) and checks what it returns; `calls` asks it every question
concurrently, with a timeout, recording answers, latency and errors in
`app_outputs.jsonl`; `chats` plays a test set of conversations with a conversational
app, turn by turn; `experiment` judges those outputs as `judge eval` judges a file.
"""
