"""The word lists the field-size corpus is written from (data only, no logic).

Ranked lists: position is frequency rank, so a query word's breadth follows
from where it stands. The head is the English an agent conversation is made
of; a synthetic tail (see :mod:`bench.field.text`) makes the vocabulary tens
of thousands of words long. The CJK lists are the words a Chinese, Japanese or
Korean user of a coding agent types, most common first. Two words appear
nowhere on purpose: the no-hit queries (:data:`NEVER_WRITTEN`).
"""

from __future__ import annotations


def _words(text: str) -> list[str]:
    """A whitespace-separated list, kept as text: data reads better that way."""
    return text.split()


# Function words first, then the words of software work. The query words of
# bench.field.queries stand where their breadth should be: "error" near the top
# (about a third of all messages), "docker"/"deployment" further down, the
# deploy* family spread out, "kubernetes" in the middle.
HEAD_TEXT = """
the to a of and is in it error you that for this on docker with be i we can not are
deployment have or as if at file will but use from run so do an test code my what
which should there all
command need was one when add then line just output function new value set check here
more out its build config like now want how also get make see into some your path
version time change fix first python only data each has default list any module failed
other our package return after server update would work same log import call step next
because where local using script changes message before class type way state
since cache user could field object string both start try read write open close result
kubernetes
query index table column row schema session store engine commit branch merge release tag
review patch diff repository remote origin push pull fetch deploy cluster node service
container image volume network port host proxy request response header status timeout
retry latency memory disk thread process signal queue worker task job schedule cron
backup restore migrate migration upgrade downgrade install uninstall dependency lock
unlock token secret key certificate permission owner group mode socket kernel driver
compiler linker binary library symbol debug trace profile benchmark metric counter gauge
histogram alert dashboard graph chart report summary detail context prompt reply answer
question reason plan goal idea problem solution workaround bug feature issue ticket sprint
deadline estimate deployed rust golang javascript typescript kotlin swift
haskell erlang elixir clojure postgres mysql sqlite redis kafka rabbitmq nginx apache
caddy traefik envoy terraform ansible puppet chef helm kubectl minikube podman buildah
deploying skopeo vacuum checkpoint journal snapshot replica shard partition compaction
tombstone agent model provider gateway telegram discord slack whatsapp signal browser
terminal shell bash zsh environment variable secret vault staging production preview
local remote api endpoint route handler middleware router controller view template
render component state props hook effect reducer store action dispatch selector
deploys frontend backend database storage bucket object blob upload download stream
buffer chunk batch pipeline stage runner executor scheduler dispatcher broker consumer
producer topic offset lag throughput concurrency parallel async await future promise
callback event listener emitter subscriber publisher channel message payload schema
validation serializer parser lexer token grammar syntax semantic type generic interface
trait struct enum union pointer reference borrow lifetime owner mutex semaphore atomic
deployer allocation garbage collector heap stack frame register instruction cycle cache
miss hit eviction policy ttl expiry refresh invalidate warm cold hot path fast slow
regression bisect flaky retry backoff jitter convoy contention deadlock starvation
livelock fairness priority preemption quota limit burst rate throttle circuit breaker
fallback degrade recover failover election leader follower quorum consensus raft paxos
gossip membership heartbeat probe liveness readiness startup shutdown graceful drain
"""
HEAD_WORDS = list(dict.fromkeys(_words(HEAD_TEXT)))

# Syllables of the synthetic tail: pronounceable, never one of the reserved words.
ONSETS = _words(
    "b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr bl cl fl gl pl sl st sp sk"
)
VOWELS = _words("a e i o u ai ea ie oa ou")
CODAS = ["", "", "", "n", "r", "l", "s", "t", "m", "nd", "rt", "ck", "ng"]

# Built into identifiers and paths (snake_case, camelCase, dotted modules).
CODE_WORDS = _words("""
user session token config cache queue worker task job server client request response
handler router service model store repo db conn pool engine query index search result
message event stream buffer file path dir log logger error retry timeout lock state
manager factory builder adapter provider gateway agent tool call memory context prompt
parse load save read write open close send recv fetch push pull sync flush commit
""")
DIRS = _words("""
src lib app api core utils tests scripts config deploy docs internal pkg cmd web
server client models services handlers adapters gateway agent tools migrations bench
""")
EXTENSIONS = _words(".py .py .py .ts .ts .js .go .rs .yaml .yml .json .toml .md .sh .sql")
TOOL_NAMES = (
    "terminal",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "web_search",
    "web_extract",
    "delegate_task",
    "memory",
    "todo",
)

# Chinese: common words of a chat about software, most common first.
ZH_TEXT = """
我们 这个 问题 一下 可以 需要 已经 现在 然后 因为 所以 但是 如果 没有 什么 怎么
服务器 配置 文件 错误 修改 代码 部署 测试 用户 数据库 接口 为什么 时候 知道 应该 可能
进行 使用 运行 安装 更新 版本 日志 脚本 容器 镜像 网络 端口 请求 响应 超时 重试
服务端 内存 磁盘 线程 进程 任务 定时 备份 恢复 迁移 升级 依赖 权限 密钥 证书 调试
性能 监控 告警 报告 总结 上下文 提示词 回答 方案 功能 需求 项目 仓库 分支 合并 提交
发布 回滚 缓存 索引 查询 字段 表格 会话 消息 模型 令牌 费用 记忆 聊天 记录 断裂 搜索
中文 分词 前端 后端 页面 按钮 样式 组件 框架 工具 命令 终端 参数 环境 变量 路径 目录
计划 训练 推理 延迟 吞吐 并发 事务 连接 数据 结构 算法 函数 方法 对象 字符串 列表
字典 异常 报错 警告 成功 失败 完成 开始 结束 打开 关闭 读取 写入 删除 创建 检查 确认
分析 优化 重构 文档 说明 例子 步骤 原因 结果 影响 建议 帮我 看看 一个 这样 那个 还是
或者 而且 不过 其实 比较 非常 特别 好的 谢谢 麻烦 请问 今天 明天 昨天 晚上 早上 周末
负载 均衡 集群 节点 副本 分片 压缩 清理 空间 增长 服务 客户端 浏览器 插件 模板 渲染
"""
ZH_WORDS = _words(ZH_TEXT)
# Characters of the synthetic Chinese tail (two and three character words).
ZH_CHARS = (
    "的一是不了人在有我他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家"
    "学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经"
    "头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者"
    "向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气"
    "信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活"
    "难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清"
    "物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功"
)
NEVER_WRITTEN = ("鸡蛋", "xylophone")
"""Queries that must find nothing: neither is ever written (the tail cannot form them)."""

# Japanese: kanji and katakana words, particles and endings.
JA_WORDS = _words("""
設定 確認 問題 実行 更新 削除 作成 変更 修正 エラー サーバー データベース ファイル デプロイ
コンテナ イメージ ログ スクリプト テスト ユーザー リクエスト レスポンス タイムアウト メモリ
ディスク プロセス タスク バックアップ 移行 依存関係 権限 証明書 デバッグ 性能 監視 報告 要約
質問 回答 理由 計画 目標 解決策 機能 課題 環境 変数 パス ディレクトリ コマンド 端末 引数 接続
トランザクション 検索 索引 キャッシュ 会話 メッセージ モデル 料金 記憶 履歴 今日 明日 原因
結果 影響 提案 手順 文書 例 最適化 分析 構造 関数 方法 クラス 文字列 リスト 例外 警告 成功
失敗 完了 開始 終了 読み込み 書き込み 仕組み 全部 少し 本番 ステージング ブランチ コミット
""")
JA_PARTICLES = _words("は が を に で と の も から まで へ")
JA_ENDINGS = (
    "です。",
    "ます。",
    "ました。",
    "ください。",
    "でしょうか？",
    "してください。",
    "しました。",
    "と思います。",
    "できますか？",
)

# Korean: words with particles attached, spaced like Korean text.
KO_WORDS = _words("""
서버 데이터베이스 파일 오류 배포 설정 확인 문제 실행 업데이트 삭제 생성 변경 수정 컨테이너
이미지 로그 스크립트 테스트 사용자 요청 응답 시간 메모리 디스크 프로세스 작업 백업 복구 이전
권한 인증서 디버그 성능 모니터링 보고서 요약 질문 답변 이유 계획 목표 해결 기능 환경 변수 경로
명령 터미널 연결 검색 캐시 대화 메시지 모델 비용 기억 기록 오늘 내일 지금 다시 먼저 원인 결과
영향 제안 단계 문서 예시 최적화 분석 구조 함수 방법 클래스 문자열 목록 예외 경고 성공 실패 완료
""")
KO_PARTICLES = ["", "", "을", "를", "이", "가", "은", "는", "에", "에서", "으로", "와", "도", "의"]
KO_FILLERS = _words("그리고 하지만 그래서 그런데 혹시 아마 정말 조금 너무 바로 계속 항상")
KO_ENDINGS = (
    "합니다.",
    "했습니다.",
    "해주세요.",
    "할까요?",
    "입니다.",
    "같습니다.",
    "있습니다.",
    "없습니다.",
)

# Latin words glued into CJK text (修改youer服务端的计划).
GLUED = _words("""
docker nginx redis API config.yaml youer README Python SQLite git PR CI token JSON
kubectl deploy.sh main.py Telegram Discord webhook bug log cron prompt agent model
""")
