"""Screening rules for instructions written in Chinese, Japanese, Russian, Spanish, French and German.

Each language has its own phrasings of the families the English rules cover (override the instructions, tamper
with the tests, dump the environment, collect credentials, send data out, run a download, pose as a role) and its
own negation words. Spanish, French and German patterns read the Latin view (look-alikes folded, accents stripped:
"Lösche" is "losche"); Chinese, Japanese and Russian read the native view. Reasons are the English rules' reasons,
so a user sees one vocabulary whatever language a memory is in.
"""

from __future__ import annotations

import re

from mtl_graph.memory.screening.rules import EXTERNAL_URL, RULES, Rule, rx

REASONS = {rule.name: rule.reason for rule in RULES}


def _before(words: str) -> re.Pattern[str]:
    return rx(rf"(?:{words})[^.;:!?。！？；\n]{{0,30}}$")


_G = r"(?:\w+\s+){0,3}?"  # up to three words between a verb and its object
_NOT_OUTPUT = r"(?:(?!cache|resultad|resultat|ergebnis|ausgabe|sortie|salida|logs?\b|journa)\w+\s+){0,3}?"

# language -> (view, negation before a match, negation after / inside it, {rule: pattern})
_LANGUAGES: dict[str, tuple[str, re.Pattern[str], re.Pattern[str] | None, dict[str, str]]] = {
    "zh": ("native", _before(r"不要|别|別|切勿|请勿|請勿|勿|不能|不可|不得|禁止|绝不|絕不|从不|從不|不应|不應|避免|而不是|不需要"),
           None, {
        "override_instructions":
            r"(?:忽略|无视|無視|忘记|忘記|不要理会|不要理會|别管|推翻|绕过|繞過)[^。\n]{0,12}?(?:指令|指示|说明|說明|规则|規則|提示词|提示|约束|約束)",
        "tamper_tests":
            r"(?:删除|刪除|删掉|刪掉|移除|清空|注释掉|註釋掉|禁用|篡改)[^。，,；\n]{0,8}?(?:测试|測試|断言|斷言|test)"
            r"|(?:跳过|跳過|修改|改写|改寫|覆盖|覆蓋|替换|替換|编辑|編輯|削弱|放宽|放寬)(?:掉)?(?:所有|全部|现有|現有|已有|原有|给定|給定|提供|失败|失敗|隐藏|隱藏)"
            r"的?(?:测试|測試|断言|斷言)"
            r"|(?:让|讓|使|把)[^。\n]{0,8}?(?:测试|測試)[^。\n]{0,8}?(?:什么都不做|什麼都不做|空操作|直接通过|直接通過|永远通过|永遠通過|总是通过|總是通過)"
            r"|(?:断言|斷言|assert)[^。\n]{0,8}?(?:替换|替換|换|換|改)(?:成|为|為)\s*pass"
            r"|(?:旧|舊|以前|之前|早期)的?(?:提交|版本|commit)[^。\n]{0,12}?(?:测试|測試)"
            r"|(?:测试|測試)[^。\n]{0,12}?(?:旧|舊|以前的|之前的)(?:提交|版本|commit)"
            r"|(?:把|将|將)[^。\n]{0,8}?(?:测试|測試|断言|斷言)[^。\n]{0,8}?(?:删除|刪除|删掉|刪掉|移除|清空|注释掉|註釋掉|禁用|篡改|跳过|跳過)",
        "env_dump":
            r"(?:打印|输出|輸出|显示|顯示|列出|导出|導出|转储|轉儲|记录|記錄|保存|发送|發送)(?:出)?[^。\n]{0,6}?(?:所有|全部|整个|整個|完整)的?"
            r"(?:环境变量|環境變數|环境|環境)"
            r"|(?:打印|输出|輸出|显示|顯示|列出|导出|導出|转储|轉儲|发送|發送|保存)[^。\n]{0,4}?(?:环境变量|環境變數)的?(?:全部|所有|完整)"
            r"|(?:把|将|將)(?:所有|全部|整个|整個|完整)的?(?:环境变量|環境變數|环境|環境)[^。\n]{0,6}?"
            r"(?:打印|输出|輸出|显示|顯示|导出|導出|转储|轉儲|发送|發送|保存|写|寫)",
        "read_credentials":
            r"(?:读取|讀取|查看|打印|输出|複製|复制|收集|窃取|竊取|偷|上传|上傳|发送|發送|导出|泄露|cat)[^。\n]{0,10}?"
            r"(?:ssh\s*(?:私钥|密钥|key)|私钥|私鑰|\.ssh|id_rsa)"
            r"|(?:复制|複製|收集|窃取|竊取|偷|上传|上傳|发送|發送|导出|泄露)[^。\n]{0,10}?"
            r"(?:凭据|憑據|凭证|憑證|密码|密碼|令牌|api\s*(?:密钥|key)|密钥)",
        "exfiltration":
            r"(?:发送|發送|上传|上傳|传到|傳到|推送|转发|轉發|泄露|外传)[^。\n]{0,20}?(?:到|至|给|給)[^。\n]{0,6}?"
            r"(?:外部|远程|遠程|第三方|攻击者|攻擊者|另一个|另一個|其他|别的|https?://(?!localhost|127\.))",
        "pipe_to_shell":
            r"(?:下载|下載)[^。\n]{0,24}?(?:bash|sh|shell)\s*(?:中|里|裡)?(?:执行|執行|运行|運行)"
            r"|(?:管道|pipe)[^。\n]{0,6}?(?:给|給|到|传给|傳給)\s*(?:bash|sh)",
        "impersonates_prompt": r"^[\s#>*=\[【-]*(?:系统|系統|开发者|開發者|管理员|管理員)\s*[】\]]?\s*:",
    }),
    "ja": ("native", _before(r"決して|絶対に"),
           re.compile(r"(?<!何も)(?:しない|しないで|せず|するな|しては|してはいけ|禁止|ないで|ません|べからず)"), {
        "override_instructions":
            r"(?:以前|前|上記|これまで|すべて|全て|システム|元)の?[^。\n]{0,8}?(?:指示|命令|ルール|指令|プロンプト|制約)[^。\n]{0,6}?"
            r"(?:無視|忘れ|破棄|上書き)",
        "tamper_tests":
            r"(?:テスト|アサーション|assert)[^。\n]{0,10}?(?:削除|消去|除去|無効化|無効に|コメントアウト|空に|改ざん|書き換え|スキップ)"
            r"|(?:テスト)[^。\n]{0,10}?(?:何もしない|常に成功|必ず成功|必ず通る|常にパス)"
            r"|(?:アサーション|assert)[^。\n]{0,10}?pass\s*に(?:置き換え|置換|書き換え)"
            r"|(?:古い|以前の|前の)(?:コミット|バージョン)[^。\n]{0,12}?テスト",
        "env_dump":
            r"(?:すべて|全て|全部)の?環境変数[^。\n]{0,8}?(?:表示|出力|印刷|ダンプ|書き出|送信|保存|ログ)"
            r"|環境変数を(?:すべて|全部|全て)[^。\n]{0,4}?(?:表示|出力|ダンプ)|環境(?:全体|変数全体)を(?:表示|出力|ダンプ)",
        "read_credentials":
            r"(?:ssh(?:の)?(?:秘密)?鍵|秘密鍵|\.ssh|id_rsa)[^。\n]{0,8}?(?:読み取|読み込|表示|出力|コピー|収集|盗|送信|アップロード|取得)"
            r"|(?:パスワード|トークン|apiキー|認証情報|資格情報)[^。\n]{0,8}?(?:コピー|収集|盗|送信|アップロード|漏ら|書き出)",
        "exfiltration":
            r"(?:外部|リモート|第三者|攻撃者|別の|https?://(?!localhost|127\.)\S+)[^。\n]{0,20}?(?:に|へ)[^。\n]{0,6}?"
            r"(?:送信|アップロード|送|転送|プッシュ|漏)",
        "pipe_to_shell":
            r"ダウンロード[^。\n]{0,24}?(?:bash|sh|シェル)\s*(?:に|で)[^。\n]{0,4}?(?:実行|パイプ|流し込)",
        "impersonates_prompt": r"^[\s#>*=\[【-]*(?:システム|開発者|管理者)\s*[】\]]?\s*:",
    }),
    "ru": ("native", _before(r"\bне\b|\bни\b|никогда|нельзя|запрещено|избега\w*|вместо\s+того|\bбез\b"), None, {
        "override_instructions":
            rf"\b(?:игнорир\w*|проигнорир\w*|забуд\w*|забыть|не\s+обраща\w*\s+внимани\w*\s+на|обо[йи]д\w*|"
            rf"обходи\w*)\s+{_G}"
            r"(?:инструкци\w*|указани\w*|правил\w*|промпт\w*|ограничени\w*|системн\w+\s+(?:промпт|сообщени)\w*)",
        "tamper_tests":
            rf"\b(?:удал\w*|стер\w*|сотр\w*|закомментир\w*|отключ\w*|очист\w*|опустош\w*|выключ\w*)\s+{_G}"
            r"(?:тест\w*|проверк\w*|assert\w*|утвержден\w*)"
            r"|\b(?:пропуст\w*|пропуска\w*|измен\w*|перепиш\w*|ослаб\w*|исправ\w*)\s+(?:\w+\s+)?(?:падающ\w*|"
            r"провальн\w*|"
            r"существующ\w*|имеющ\w*|исходн\w*|данн\w*|все|предоставленн\w*)\s+(?:тест\w*|проверк\w*)"
            r"|\bтест\w*\s+(?:\w+\s+){0,3}?(?:пуст\w*|ничего\s+не\s+дела\w*|всегда\s+проход\w*)"
            r"|\bзамен\w*\s+(?:\w+\s+){0,2}?(?:assert\w*|утвержден\w*|проверк\w*)\s+(?:на|в)\s+pass"
            r"|\bтест\w*[^.\n]{0,40}(?:стар\w*|предыдущ\w*|прошл\w*|ранн\w*)\s+(?:коммит\w*|верси\w*|ревизи\w*)",
        "env_dump":
            r"\b(?:выведи\w*|вывест\w*|распечата\w*|напечата\w*|покаж\w*|сохран\w*|выгруз\w*|отправ\w*|запиш\w*|"
            r"дамп\w*|"
            r"сдамп\w*)\s+(?:\w+\s+){0,2}?(?:все|всю|полн\w*|цел\w*|весь)\s+(?:\w+\s+)?(?:переменн\w+\s+окружени\w*|"
            r"окружени\w*|переменн\w+\s+сред\w*|сред\w*)",
        "read_credentials":
            rf"\b(?:прочита\w*|прочт\w*|выведи\w*|скопир\w*|собер\w*|собира\w*|укра\w*|похит\w*|отправ\w*)\s+{_G}"
            r"(?:ssh[- ]?ключ\w*|закрыт\w+\s+ключ\w*|приватн\w+\s+ключ\w*|~/\.ssh)"
            rf"|\b(?:скопир\w*|собер\w*|собира\w*|укра\w*|похит\w*|отправ\w*|выгруз\w*|сле[йи]\w*|слить)\s+{_G}"
            r"(?:учетн\w+\s+данн\w*|парол\w*|токен\w*|секрет\w*|api[- ]?ключ\w*)",
        "exfiltration":
            r"\b(?:отправ\w*|загруз\w*|выгруз\w*|перешл\w*|пересла\w*|переда\w*|запуш\w*|сле[йи]\w*|"
            r"слить)\s+[^\n]{0,60}?"
            r"\b(?:на|в)\s+(?:внешн\w+|удаленн\w+|сторонн\w+|чуж\w+|друг\w+)\s+(?:сервер\w*|хост\w*|адрес\w*|url|"
            r"репозитори\w*|remote)"
            rf"|\b(?:отправ\w*|загруз\w*|выгруз\w*|перешл\w*|пересла\w*|переда\w*|сле[йи]\w*|слить)\s+[^\n]{{0,60}}?"
            rf"\b(?:на|в)\s+{EXTERNAL_URL}",
        "pipe_to_shell":
            r"\b(?:скача\w*|загруз\w*)\s+[^.\n]{0,40}?\b(?:запуст\w*|выполн\w*|переда\w*|перенаправ\w*)\s+[^.\n]{0,20}?"
            r"\b(?:bash|sh|шелл\w*|оболочк\w*)",
        "impersonates_prompt": r"^[\s#>*=\[-]*(?:система|разработчик|администратор)\s*\]?\s*:",
    }),
    "es": ("latin", _before(r"\b(?:no|nunca|jamas|evit\w*|sin|en\s+lugar\s+de|nada\s+de|ni)\b"), None, {
        "override_instructions":
            rf"\b(?:ignor\w*|olvid\w*|descart\w*|pasa\s+por\s+alto|anul\w*)\s+{_G}(?:las\s+)?(?:instrucciones|"
            rf"indicaciones|"
            r"reglas|directrices|prompt|restricciones|mensaje\s+del\s+sistema)\b",
        "tamper_tests":
            rf"\b(?:borr\w*|elimin\w*|quit\w*|suprim\w*|coment\w*|desactiv\w*|deshabilit\w*|vaci\w*)\s+{_NOT_OUTPUT}"
            r"(?:tests?|pruebas?|aserciones|asserts?|casos\s+de\s+prueba)\b"
            r"|\b(?:salt\w*|omit\w*|modific\w*|cambi\w*|edit\w*|reescrib\w*|debilit\w*)\s+(?:\w+\s+){0,2}?(?:tests?|"
            r"pruebas?)\s+(?:que\s+fallan|fallidas?|existentes|originales|proporcionad\w+|dad\w+|ocult\w+)"
            r"|\b(?:tests?|pruebas?)\s+(?:\w+\s+){0,2}?(?:no\s+hag\w+\s+nada|sea\s+un\s+no-?op|sea\s+vaci\w+|"
            r"pase\s+siempre|"
            r"siempre\s+pas\w*)"
            r"|\b(?:reemplaz\w*|sustitu\w*|cambi\w*)\s+(?:\w+\s+){0,2}?(?:asserts?|aserciones)\s+(?:por|con)\s+pass"
            r"|\b(?:tests?|pruebas?)\b[^.\n]{0,30}\b(?:borr|elimin|coment|desactiv|vaci|quit)\w*(?:los|las)\b"
            r"|\b(?:pruebas?|tests?)\s+[^.\n]{0,30}(?:commit|version|revision)\s+(?:antigu\w*|anterior\w*|viej\w*|"
            r"previ\w*)",
        "env_dump":
            r"\b(?:imprim\w*|muestr\w*|mostr\w*|list\w*|volc\w*|vuelc\w*|export\w*|guard\w*|envi\w*|registr\w*)\s+"
            r"(?:\w+\s+){0,2}?(?:todas?|todo|completo|entero)\s+(?:\w+\s+){0,2}?(?:variables\s+de\s+(?:entorno|"
            r"ambiente)|"
            r"entorno)\b|\b(?:imprim\w*|muestr\w*|volc\w*|vuelc\w*)\s+(?:todo\s+)?el\s+entorno\b(?!\s+virtual)",
        "read_credentials":
            rf"\b(?:lee\w*|leer|copi\w*|recopil\w*|rob\w*|extra\w*|envi\w*|imprim\w*|muestr\w*)\s+{_G}"
            r"(?:claves?\s+ssh|claves?\s+privadas?|~/\.ssh)"
            rf"|\b(?:copi\w*|recopil\w*|rob\w*|extra\w*|envi\w*|sub\w*|imprim\w*|filtr\w*)\s+{_G}"
            r"(?:credenciales|contrasenas|tokens|secretos|claves\s+de\s+(?:la\s+)?api)\b",
        "exfiltration":
            r"\b(?:envi\w*|sub\w*|mand\w*|transmit\w*|reenvi\w*|filtr\w*|empuj\w*)\s+[^\n]{0,60}?\b(?:a|al|hacia|en)\s+"
            r"(?:un\s+|una\s+|el\s+|otro\s+)?(?:servidor|host|url|direccion|repositorio|remoto)\s+(?:extern\w*|"
            r"remot\w*|"
            r"ajen\w*|de\s+terceros|diferente|distint\w*)"
            rf"|\b(?:envi|sub|mand|transmit|reenvi|filtr|empuj)\w*\s+[^\n]{{0,60}}?\b(?:a|al|hacia|"
            rf"en)\s+{EXTERNAL_URL}",
        "pipe_to_shell":
            r"\bdescarg\w*\s+[^.\n]{0,50}?\b(?:ejecut\w*|pas\w*|canaliz\w*|redirig\w*)\s+[^.\n]{0,20}?"
            r"\b(?:bash|sh|shell|sudo)\b",
        "impersonates_prompt": r"^[\s#>*=\[-]*(?:sistema|desarrollador|administrador)\s*\]?\s*:",
    }),
    "fr": ("latin", _before(r"\b(?:ne|n'|jamais|sans|evit\w*|au\s+lieu\s+de|plutot\s+que)\b|\bn'"), None, {
        "override_instructions":
            rf"\b(?:ignor\w*|oubli\w*|fais\s+abstraction\s+d\w*|ne\s+tiens?\s+pas\s+compte\s+d\w*)\s+{_G}"
            r"(?:instructions|consignes|regles|directives|prompt|contraintes|message\s+systeme)\b",
        "tamper_tests":
            rf"\b(?:supprim\w*|efface\w*|retir\w*|enlev\w*|comment\w*|desactiv\w*|vide[rz]?)\s+{_NOT_OUTPUT}"
            r"(?:tests?|assertions|asserts?|cas\s+de\s+test)\b"
            r"|\b(?:ignor\w*|saut\w*|modifi\w*|change\w*|reecri\w*|affaibli\w*)\s+(?:\w+\s+){0,2}?tests?\s+"
            r"(?:qui\s+echouent|en\s+echec|existants|fournis|originaux|caches)"
            r"|\btests?\s+(?:\w+\s+){0,3}?(?:ne\s+fasse\s+rien|ne\s+fait\s+rien|soit\s+un\s+no-?op|soit\s+vide|"
            r"passe\s+toujours|toujours\s+pass\w*)"
            r"|\b(?:remplac\w*|substitu\w*)\s+(?:\w+\s+){0,2}?(?:asserts?|assertions)\s+(?:par|avec)\s+pass"
            r"|\b(?:met\w*|place\w*)\s+(?:les\s+|ces\s+)?(?:\w+\s+)?tests?\s+(?:\w+\s+)?en\s+commentaire"
            r"|\btests?\b[^.\n]{0,30}\b(?:supprim|efface|comment|desactiv|vide)\w*-les\b"
            r"|\btests?\s+[^.\n]{0,30}(?:ancien(?:ne)?|precedent\w*|vieux|vieil)\s+(?:commit|version|revision)",
        "env_dump":
            r"\b(?:affich\w*|imprim\w*|list\w*|dump\w*|export\w*|sauvegard\w*|envoi\w*|envoy\w*|enregistr\w*)\s+"
            r"(?:[\w']+\s+){0,2}?(?:toutes?|tout|tous|complet|"
            r"entier)\s+(?:[\w']+\s+){0,2}?(?:variables\s+d'?environnement|"
            r"l'?environnement)\b|\b(?:affich\w*|imprim\w*|dump\w*)\s+(?:tout\s+)?l'?environnement\b"
            r"(?!\s+(?:virtuel|python|de\s+(?:dev|test)))",
        "read_credentials":
            rf"\b(?:lis|lire|lisez|copi\w*|collect\w*|recuper\w*|vol\w*|exfiltr\w*|envoi\w*|envoy\w*|affich\w*)\s+{_G}"
            r"(?:cles?\s+ssh|cles?\s+privees?|~/\.ssh)"
            rf"|\b(?:copi\w*|collect\w*|vol\w*|exfiltr\w*|envoi\w*|envoy\w*|affich\w*|imprim\w*)\s+{_G}"
            r"(?:identifiants|mots\s+de\s+passe|jetons|tokens|secrets|cles\s+d'?api)\b",
        "exfiltration":
            r"\b(?:envoi\w*|envoy\w*|televers\w*|transfer\w*|transmet\w*|pousse\w*|exfiltr\w*)\s+[^\n]{0,60}?"
            r"\b(?:a|au|vers|sur)\s+(?:un\s+|une\s+|le\s+|l')?(?:(?:autre\s+)(?:serveur|hote|url|adresse|depot|remote)|"
            r"(?:serveur|hote|url|adresse|depot|remote)\s+(?:extern\w*|distant\w*|tiers|autre|different\w*))"
            rf"|\b(?:envoi|envoy|televers|transfer|transmet|pousse|exfiltr)\w*\s+[^\n]{{0,60}}?\b(?:a|au|vers|sur)\s+"
            rf"{EXTERNAL_URL}",
        "pipe_to_shell":
            r"\btelecharg\w*\s+[^.\n]{0,50}?\b(?:execut\w*|lanc\w*|pass\w*|redirig\w*)[\s-]+[^.\n]{0,20}?"
            r"\b(?:bash|sh|shell|sudo)\b",
        "impersonates_prompt": r"^[\s#>*=\[-]*(?:systeme|developpeur|administrateur)\s*\]?\s*:",
    }),
    "de": ("latin", _before(r"\b(?:nicht|nie|niemals|kein\w*|ohne|statt|anstatt|vermeide\w*|auf\s+keinen\s+fall)\b"),
           re.compile(r"\b(?:nicht|nie|niemals|keinesfalls)\b", re.I), {
        "override_instructions":
            rf"\b(?:ignorier\w*|vergiss|vergessen|missacht\w*|uberschreib\w*|umgeh\w*)\s+{_G}(?:anweisungen|"
            rf"anleitungen|"
            r"instruktionen|regeln|richtlinien|vorgaben|prompt|systemprompt|einschrankungen)\b"
            r"|\b(?:anweisungen|instruktionen|regeln|vorgaben)\s+(?:\w+\s+){0,2}?(?:ignorier\w*|vergess\w*|"
            r"missacht\w*)",
        "tamper_tests":
            rf"\b(?:losch\w*|entfern\w*|leere\w*|auskommentier\w*|deaktivier\w*|streich\w*)\s+{_NOT_OUTPUT}"
            r"(?:tests?|testdatei\w*|testfall\w*|testfalle|assertions?|asserts?|prufungen)\b"
            r"|\bkommentier\w*\s+(?:\w+\s+){0,3}?(?:tests?|testdatei\w*|assertions?)\s+aus\b"
            r"|\b(?:tests?|testdatei\w*|assertions?)\s+(?:\w+\s+){0,2}?(?:loschen|entfernen|leeren|auskommentieren|"
            r"deaktivieren)\b"
            r"|\b(?:uberspring\w*|anderer?\w*|andere|bearbeit\w*|abschwach\w*)\s+(?:\w+\s+)?(?:fehlschlagend\w*|"
            r"vorhanden\w*|bestehend\w*|gegeben\w*|ursprunglich\w*|alle)\s+tests?\b"
            r"|\b(?:testdatei|tests?)\s+(?:\w+\s+){0,4}?(?:nichts\s+(?:mehr\s+)?(?:tut|tun|macht)|ein\s+no-?op|"
            r"leer\s+ist|"
            r"immer\s+besteh\w*)"
            r"|\b(?:ersetz\w*|tausch\w*)\s+(?:\w+\s+){0,2}?(?:asserts?|assertions?|zusicherungen)\s+(?:durch|"
            r"mit)\s+pass"
            r"|\btest\w*\s+[^.\n]{0,30}(?:alt\w*|vorherig\w*|fruher\w*|fruheren)\s+(?:commit|version|revision|stand)",
        "env_dump":
            r"\b(?:gib|ausgeb\w*|druck\w*|zeig\w*|list\w*|dump\w*|speicher\w*|sende\w*|schick\w*|protokollier\w*)\s+"
            r"(?:\w+\s+){0,2}?(?:alle|samtliche|gesamte|ganze|komplette)\s+(?:\w+\s+)?(?:umgebungsvariablen|umgebung)\b"
            r"|\b(?:alle|samtliche|gesamte|ganze|komplette)\s+(?:\w+\s+)?(?:umgebungsvariablen|"
            r"umgebung)\s+(?:\w+\s+){0,2}?"
            r"(?:aus|ausgeben|drucken|anzeigen|dumpen|speichern|senden|schicken|protokollieren|loggen)\b",
        "read_credentials":
            rf"\b(?:lies|lese\w*|kopier\w*|samm(?:e)?l\w*|stiehl|stehl\w*|schick\w*|sende\w*|druck\w*|zeig\w*)\s+{_G}"
            r"(?:ssh-?schlussel\w*|private[nr]?\s+schlussel\w*|~/\.ssh)"
            rf"|\b(?:kopier\w*|samm(?:e)?l\w*|stiehl|stehl\w*|schick\w*|sende\w*|exfiltrier\w*)\s+{_G}"
            r"(?:zugangsdaten|anmeldedaten|passworter|kennworter|tokens|geheimnisse|api-?schlussel\w*)",
        "exfiltration":
            r"\b(?:sende\w*|schick\w*|lad\w*|ubertrag\w*|push\w*|leite\w*)\s+[^\n]{0,60}?\b(?:an|auf|zu|in)\s+"
            r"(?:einen\s+|ein\s+|eine\s+|den\s+|das\s+)?(?:externe[nrs]?|entfernte[nrs]?|fremde[nrs]?|andere[nrs]?)\s+"
            r"(?:server|host|url|adresse|repository|repo|remote)"
            rf"|\b(?:sende|schick|lad|ubertrag|push|leite)\w*\s+[^\n]{{0,60}}?\b(?:an|auf|zu|nach)\s+{EXTERNAL_URL}",
        "pipe_to_shell":
            r"\b(?:lad\w*|herunterlad\w*)\s+[^.\n]{0,50}?\b(?:fuhr\w*|pipe\w*|leite\w*|ubergib\w*)\s+[^.\n]{0,20}?"
            r"\b(?:bash|sh|shell|sudo)\b"
            r"|\b(?:herunter\w*|download\w*)[^.\n]{0,60}\b(?:bash|sh|shell)\s+(?:\w+\s+)?(?:aus(?:fuhren|fuhrt)|"
            r"weiterleiten|pipen)",
        "impersonates_prompt": r"^[\s#>*=\[-]*(?:entwickler|administrator)\s*\]?\s*:",
    }),
}


# Triggers (see Rule.trigger): a Chinese, Japanese or Russian rule only reads lines in its script; a Spanish, French
# or German one only lines with one of the nouns every match of its family contains (accents stripped).
_SCRIPTS = {"zh": r"[\u4e00-\u9fff]", "ja": r"[\u3040-\u30ff\u4e00-\u9fff]", "ru": r"[\u0400-\u04ff]"}
_NOUNS = {
    "override_instructions": r"instruc|indicacion|regla|directri|prompt|restricc|mensaje|consigne|regle|directive|"
                             r"contrainte|message|anweisung|anleitung|instruktion|regel|richtlinie|vorgabe|einschrank",
    "tamper_tests": r"test|prueba|assert|asercion|prufung|zusicherung",
    "env_dump": r"entorno|ambiente|environnement|umgebung",
    "read_credentials": r"ssh|clave|credencial|contrasena|token|secreto|cle|identifiant|mots\s+de\s+passe|jeton|"
                        r"secret|schlussel|zugangsdaten|anmeldedaten|passworter|kennworter|geheimnis",
    "exfiltration": r"servidor|host|url|direccion|repositorio|remot|serveur|hote|adresse|depot|server|repo|http",
    "pipe_to_shell": r"bash|sh\b|shell|sudo",
    "impersonates_prompt": r"sistema|desarrollador|administrador|systeme|developpeur|administrateur|entwickler|"
                           r"administrator",
}


# ... and one of the verbs (or verb phrases) every match holds, in any of the three languages: plain substrings,
# conjugated forms where the stem is an English word too (edit, change, comment), so English text skips these rules.
_VERBS = {
    "override_instructions": "ignora|ignorez|ignorer|ignore les|ignore toutes|ignore tous|ignore la|ignoriere|"
                             "olvid|descart|pasa por|anula|oubli|abstraction|"
                             "tiens pas|tient pas|vergiss|vergessen|missacht|uberschreib|umgeh",
    "tamper_tests": "borr|elimina |eliminar|elimine|suprim|comenta|desactiv|deshabilit|vaci|salta|omita|omite|"
                    "modifica |modificar|modifique|cambia|edita |editar|edites|edite |reescrib|debilit|reemplaz|"
                    "sustitu|hag|sea |siempre|antigu|viej|anterior|supprim|efface|retir|enlev|commentez|commenter|"
                    "commente l|commentaire|vide |videz|vider|ignorez|ignorer|saute|modifiez|modifier|changez|"
                    "changer|reecri|affaibli|fasse|fait rien|soit|toujours|remplac|substitue|ancien|precedent|vieux|"
                    "vieil|losch|entfern|leere|kommentier|deaktivier|streich|uberspring|andere|bearbeit|abschwach|"
                    "nichts|ein no-op|besteh|ersetz|tausch|alten|alter commit|vorherig|fruher|mett|placez|placer",
    "env_dump": "imprim|muestr|mostr|lista|volc|vuelc|exporta|guarda|envia|enviar|registra|affich|dump|sauvegard|"
                "envoy|envoi|liste|gib|ausgeb|druck|zeig|speicher|sende|schick|protokollier| aus|anzeigen|loggen",
    "read_credentials": "lee |leer|copia|copiar|copie|recopil|roba|robar|extrae|extraer|envia|enviar|imprim|muestr|"
                        "sube|subir|filtra|lis |lire|lisez|collecte|recuper|vole|voler|exfiltr|envoy|envoi|affich|"
                        "lies|lese|kopier|samm|stiehl|stehl|schick|sende|druck|zeig",
    "exfiltration": "envia|enviar|envie|envoi|sube|subir|manda|mandar|mande|transmit|reenvi|filtra|empuj|envoy|"
                    "televers|transfer|transmet|pousse|exfiltr|sende|schick|lade |laden|ubertrag|push|leite",
    "pipe_to_shell": "descarg|telecharg|lade |laden|herunter",
    "impersonates_prompt": ":",
}


def _rule(language: str, name: str, pattern: str) -> Rule:
    view, negation, after, _ = _LANGUAGES[language]
    structural = name == "impersonates_prompt"  # a role line is not an instruction that a "never" can negate
    trigger, also = ((_SCRIPTS[language], None) if language in _SCRIPTS else (_NOUNS[name], _VERBS[name]))
    return Rule(name, REASONS[name], rx(pattern), trigger=re.compile(trigger),
                also=tuple(also.split("|")) if also else (),
                view=view, natural_language=not structural, after=25,
                spares_own_files=name == "tamper_tests", negation=negation, negated_after=after)


LANGUAGE_RULES: tuple[Rule, ...] = tuple(
    _rule(language, name, pattern) for language, (*_, table) in _LANGUAGES.items() for name, pattern in table.items())
