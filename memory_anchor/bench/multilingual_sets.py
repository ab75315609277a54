"""The memories and questions of `memory-anchor bench multilingual`, written for it.

The design's retrieval checklist (ten questions an older person's
helper asks, in Chinese) and its coding checklist (five questions about a
software project, in Chinese) use the seeds' own queries; the Japanese, Korean,
German and Spanish sets are ours, in the same two registers (daily life and a
developer's project). Every question has two memories that answer it, worded
differently from the question and from each other; every set has everyday
distractors in the same language.

A memory is (key, text, days_ago): `key` names the question it answers ("" for
a distractor); `days_ago` dates it (questions such as "what did I do today" or
"last week" depend on it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    key: str
    text: str


@dataclass(frozen=True)
class Memory:
    key: str
    text: str
    days_ago: float = 3.0


@dataclass(frozen=True)
class QuestionSet:
    name: str
    language: str
    source: str
    questions: tuple[Question, ...]
    memories: tuple[Memory, ...]
    # The pass mark of `top-5` (share of questions with an answer in the first five).
    pass_top5: float = 0.9


def _set(name, language, source, questions, answers, distractors, pass_top5=0.9) -> QuestionSet:
    qs = tuple(Question(f"{name}-{i}", q) for i, q in enumerate(questions, 1))
    memories = []
    for i, texts in enumerate(answers, 1):
        for text in texts:
            days = 3.0
            if isinstance(text, tuple):
                text, days = text
            memories.append(Memory(f"{name}-{i}", text, days))
    for j, text in enumerate(distractors):
        memories.append(Memory("", text, 1.0 + (j * 1.7) % 20))
    return QuestionSet(name, language, source, qs, tuple(memories), pass_top5)


TODAY, LAST_WEEK = 0.1, 7.0

SEED_003 = _set(
    "helper-zh", "zh", "design checklist: a helper's questions",
    ["女儿电话", "吃什么药", "今天去哪了", "喜欢吃什么", "老朋友", "以前住哪", "医生说", "不能吃", "什么时候", "谁来过"],
    [
        ["女儿王小红的手机号码是13800138000", "有急事就给女儿小红打电话：13800138000"],
        ["每天早饭后吃一片降压药（氨氯地平），晚饭后吃一片阿司匹林", "降压药放在客厅的抽屉里，每天早上吃一次"],
        [("今天上午去社区活动中心下了两盘象棋", TODAY), ("今天下午去菜市场买了一条鱼和一把青菜", TODAY)],
        ["最喜欢吃红烧肉和猪肉白菜饺子", "爱吃甜食，尤其喜欢桂花糕"],
        ["老朋友张建国是以前工厂的同事，认识四十多年了", "李德明是年轻时的老战友，现在住在隔壁小区"],
        ["年轻时住在上海虹口区，1985年搬到了杭州", "以前在苏州老城区住过二十年"],
        ["医生说血压偏高，要少吃盐、多散步", "王医生诊断是轻度糖尿病，需要控制血糖"],
        ["对花生过敏，不能吃花生和含花生的点心", "有糖尿病，不能吃太甜的东西"],
        ["下次复查的时间是下周三上午九点，在人民医院", "每天晚上九点的时候要量一次血压"],
        [("今天上午社区志愿者小刘来过，帮忙打扫了房间", TODAY), ("昨天下午女儿小红带着外孙来家里看望", 1.0)],
    ],
    [
        "今天天气晴朗，气温二十度左右", "电视里在播京剧《空城计》", "阳台上的月季花开了",
        "楼下的超市周末打八折", "孙子下个月要参加高考", "家里的洗衣机有点漏水，需要找人修",
        "小区门口新开了一家理发店", "晚上看了一集电视剧", "最近睡眠不太好，半夜容易醒",
        "邻居家的小狗叫豆豆", "上个月交了水电费", "报纸上说明天要降温",
        "早上在公园打了半小时太极拳", "收音机的电池没电了", "老伴年轻时是小学老师",
        "门口的快递已经取回来了", "冰箱里还有半个西瓜", "社区下周举办重阳节联欢会",
        "手机字体调大了一些", "客厅的灯泡换成了节能灯",
    ],
    pass_top5=0.9,
)

SEED_002 = _set(
    "coding-zh", "zh", "design checklist: a coding project's questions",
    ["项目目标", "技术栈", "今天修复了什么", "为什么用 Qdrant", "上周完成了什么"],
    [
        ["项目目标：为 AI 提供跨会话的持久化记忆", "这个项目要让 Claude 在会话结束后仍然记得项目的知识，这是我们的核心目标"],
        ["技术栈：Python + FastAPI + Qdrant", "后端用 FastAPI 写，向量库选的是 Qdrant，语言是 Python 3.11"],
        [("今天修复了登录接口超时的 bug，原因是连接池太小", TODAY), ("今天修好了向量检索返回重复结果的问题", TODAY)],
        ["选择 Qdrant 的原因：支持元数据过滤、可以本地部署、Rust 实现性能好", "技术选型决策：向量库用 Qdrant 而不是 Milvus，因为部署更简单"],
        [("上周完成了记忆分层设计和 L0 身份层的实现", LAST_WEEK), ("上周做完了事件日志的 TTL 自动清理功能", LAST_WEEK)],
    ],
    [
        "数据库迁移脚本放在 migrations 目录下", "CI 在每次提交时运行全部测试", "代码评审要求至少一位同事通过",
        "日志级别默认是 INFO", "配置文件使用 YAML 格式", "接口文档用 OpenAPI 自动生成",
        "本地开发环境用 docker compose 启动", "前端页面用 Vue 3 写的", "周五下午团队开周会",
        "错误码统一定义在 errors.py 里",
    ],
    pass_top5=0.8,
)

JAPANESE = _set(
    "ja", "ja", "ours",
    ["娘の電話番号", "飲んでいる薬", "会議の時間", "好きな食べ物", "デプロイの手順",
     "テストが失敗した原因", "キャッシュに何を使う", "誕生日", "昔住んでいた場所", "アレルギー"],
    [
        ["娘の花子の電話番号は090-1234-5678です", "花子（娘）に連絡するときは携帯090-1234-5678へ電話する"],
        ["毎朝、血圧の薬を一錠飲んでいる", "夕食後に胃薬を飲むようにしている"],
        ["明日の会議は午前十時から第二会議室で始まる", "定例会議は毎週月曜日の午後三時から"],
        ["好きな食べ物はラーメンとお寿司", "甘いものが好きで、特にどら焼きをよく食べる"],
        ["デプロイは make deploy を実行してから、ステージングで確認する手順", "本番へのデプロイ前に必ずマイグレーションを流すこと"],
        ["テストが失敗した原因はタイムゾーンの設定ミスだった", "CI のテスト失敗は古いキャッシュが原因だった"],
        ["キャッシュには Redis を使うことに決定した", "セッションのキャッシュは Redis、永続化は PostgreSQL"],
        ["母の誕生日は三月十二日", "来週の金曜日は同僚の田中さんの誕生日"],
        ["昔は大阪に住んでいて、五年前に東京へ引っ越した", "学生時代は京都に住んでいた"],
        ["卵アレルギーがあるので、卵料理は食べられない", "猫アレルギーのため、猫カフェには行かない"],
    ],
    [
        "今日は一日中雨が降っていた", "駅前に新しいパン屋ができた", "週末は公園を散歩した",
        "新しいキーボードを注文した", "ログの出力形式を JSON に変えた", "洗濯機の調子が悪い",
        "図書館で本を三冊借りた", "コードレビューは二人の承認が必要", "朝のジョギングを始めた",
        "エアコンのフィルターを掃除した", "電車が遅れて遅刻しそうになった", "ベランダのトマトが赤くなった",
    ],
)

KOREAN = _set(
    "ko", "ko", "ours",
    ["딸 전화번호", "복용하는 약", "회의 시간", "좋아하는 음식", "배포 절차",
     "테스트 실패 원인", "캐시는 뭘 쓰지", "생일", "예전에 살던 곳", "알레르기"],
    [
        ["딸 민지의 전화번호는 010-1234-5678이다", "민지(딸)에게 연락할 때는 010-1234-5678로 전화한다"],
        ["매일 아침 혈압약을 한 알 복용한다", "저녁 식사 후에 위장약을 복용하고 있다"],
        ["내일 회의는 오전 열 시에 2층 회의실에서 시작한다", "정기 회의는 매주 월요일 오후 세 시이다"],
        ["가장 좋아하는 음식은 김치찌개와 불고기이다", "단 음식을 좋아해서 떡을 자주 먹는다"],
        ["배포 절차: make deploy 실행 후 스테이징에서 확인한다", "운영 서버에 배포하기 전에 반드시 마이그레이션을 실행해야 한다"],
        ["테스트가 실패한 원인은 시간대 설정 오류였다", "CI 테스트 실패 원인은 오래된 캐시였다"],
        ["캐시는 Redis를 쓰기로 결정했다", "세션 캐시는 Redis, 영구 저장은 PostgreSQL을 사용한다"],
        ["어머니 생일은 3월 12일이다", "다음 주 금요일은 동료 김철수의 생일이다"],
        ["예전에는 부산에 살다가 5년 전에 서울로 이사했다", "대학 시절에는 대전에 살았다"],
        ["땅콩 알레르기가 있어서 땅콩이 들어간 음식은 먹지 못한다", "고양이 알레르기 때문에 고양이 카페에는 가지 않는다"],
    ],
    [
        "오늘은 하루 종일 비가 왔다", "역 앞에 새 빵집이 생겼다", "주말에 공원을 산책했다",
        "새 키보드를 주문했다", "로그 출력 형식을 JSON으로 바꿨다", "세탁기 상태가 좋지 않다",
        "도서관에서 책을 세 권 빌렸다", "코드 리뷰는 두 명의 승인이 필요하다", "아침 조깅을 시작했다",
        "에어컨 필터를 청소했다", "지하철이 늦어서 지각할 뻔했다", "베란다의 토마토가 빨갛게 익었다",
    ],
)

GERMAN = _set(
    "de", "de", "ours",
    ["Telefonnummer meiner Tochter", "Welche Medikamente nehme ich?", "Wann ist die Besprechung?",
     "Was esse ich am liebsten?", "Wie läuft das Deployment ab?", "Warum ist der Test fehlgeschlagen?",
     "Welchen Cache verwenden wir?", "Wann hat wer Geburtstag?", "Wo habe ich früher gewohnt?", "Welche Allergien habe ich?"],
    [
        ["Die Telefonnummer meiner Tochter Anna ist 0151 2345678", "Anna, meine Tochter, erreicht man mobil unter 0151 2345678"],
        ["Jeden Morgen nehme ich eine Tablette gegen Bluthochdruck", "Abends nach dem Essen nehme ich ein Medikament für den Magen"],
        ["Die Besprechung morgen beginnt um zehn Uhr in Raum 2.14", "Die wöchentliche Teambesprechung ist montags um 15 Uhr"],
        ["Am liebsten esse ich Käsespätzle", "Apfelstrudel mit Vanillesoße esse ich besonders gern"],
        ["Deployment: erst make deploy ausführen, dann auf Staging prüfen", "Vor jedem Deployment in Produktion müssen die Migrationen laufen"],
        ["Der Test ist wegen einer falsch eingestellten Zeitzone fehlgeschlagen", "Die CI-Tests sind fehlgeschlagen, weil der Cache veraltet war"],
        ["Entscheidung: Wir verwenden Redis als Cache", "Für den Sitzungs-Cache nehmen wir Redis, dauerhaft gespeichert wird in PostgreSQL"],
        ["Mamas Geburtstag ist am 12. März", "Nächsten Freitag hat Kollege Müller Geburtstag"],
        ["Früher habe ich in München gewohnt, vor fünf Jahren bin ich nach Berlin gezogen", "Während des Studiums wohnte ich in Köln"],
        ["Ich habe eine Allergie gegen Erdnüsse und darf nichts mit Erdnüssen essen", "Wegen meiner Katzenallergie gehe ich nicht ins Katzencafé"],
    ],
    [
        "Heute hat es den ganzen Tag geregnet", "Am Bahnhof hat eine neue Bäckerei eröffnet", "Am Wochenende bin ich im Park spazieren gegangen",
        "Ich habe eine neue Tastatur bestellt", "Das Log-Format ist jetzt JSON", "Die Waschmaschine macht komische Geräusche",
        "In der Bibliothek habe ich drei Bücher ausgeliehen", "Code-Reviews brauchen zwei Freigaben", "Ich habe mit dem Joggen angefangen",
        "Der Filter der Klimaanlage wurde gereinigt", "Die S-Bahn hatte Verspätung", "Die Tomaten auf dem Balkon sind rot geworden",
    ],
)

SPANISH = _set(
    "es", "es", "ours",
    ["teléfono de mi hija", "¿Qué medicamentos tomo?", "¿A qué hora es la reunión?", "comida favorita",
     "¿Cómo se hace el despliegue?", "¿Por qué falló la prueba?", "¿Qué caché usamos?", "cumpleaños",
     "¿Dónde vivía antes?", "alergias"],
    [
        ["El teléfono de mi hija Lucía es 612 345 678", "Para llamar a Lucía, mi hija: móvil 612 345 678"],
        ["Cada mañana tomo una pastilla para la tensión alta", "Después de cenar tomo un medicamento para el estómago"],
        ["La reunión de mañana empieza a las diez en la sala 3", "La reunión semanal del equipo es los lunes a las tres de la tarde"],
        ["Mi comida favorita es la paella de marisco", "Me encanta el flan casero, lo como casi todos los domingos"],
        ["Despliegue: primero make deploy y luego comprobar en staging", "Antes de cada despliegue a producción hay que ejecutar las migraciones"],
        ["La prueba falló por una zona horaria mal configurada", "Las pruebas de CI fallaron porque la caché estaba obsoleta"],
        ["Decisión: usamos Redis como caché", "Para la caché de sesiones usamos Redis y para los datos PostgreSQL"],
        ["El cumpleaños de mamá es el 12 de marzo", "El viernes que viene es el cumpleaños de mi compañero Javier"],
        ["Antes vivía en Sevilla; hace cinco años me mudé a Madrid", "Durante la universidad viví en Salamanca"],
        ["Soy alérgico a los cacahuetes y no puedo comer nada que los lleve", "Por mi alergia a los gatos no voy a cafeterías de gatos"],
    ],
    [
        "Hoy ha llovido todo el día", "Han abierto una panadería nueva junto a la estación", "El fin de semana paseé por el parque",
        "He pedido un teclado nuevo", "El formato de los logs ahora es JSON", "La lavadora hace ruidos raros",
        "Saqué tres libros de la biblioteca", "Las revisiones de código necesitan dos aprobaciones", "Empecé a correr por las mañanas",
        "Limpié el filtro del aire acondicionado", "El tren llegó con retraso", "Los tomates del balcón ya están rojos",
    ],
)

ALL_SETS = (SEED_003, SEED_002, JAPANESE, KOREAN, GERMAN, SPANISH)
