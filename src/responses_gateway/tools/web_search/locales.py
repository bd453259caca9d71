"""Countries as each provider names them: `user_location.country` is an ISO 3166-1 alpha-2 code; Tavily takes an
English country name, SearXNG a locale, Brave a code from its own list."""

from __future__ import annotations

# Tavily's `country` values (its API reference lists them by name, lower case).
TAVILY = {
    "AF": "afghanistan", "AL": "albania", "DZ": "algeria", "AD": "andorra", "AO": "angola", "AR": "argentina",
    "AM": "armenia", "AU": "australia", "AT": "austria", "AZ": "azerbaijan", "BS": "bahamas", "BH": "bahrain",
    "BD": "bangladesh", "BB": "barbados", "BY": "belarus", "BE": "belgium", "BZ": "belize", "BJ": "benin",
    "BT": "bhutan", "BO": "bolivia", "BA": "bosnia and herzegovina", "BW": "botswana", "BR": "brazil",
    "BN": "brunei", "BG": "bulgaria", "BF": "burkina faso", "BI": "burundi", "KH": "cambodia", "CM": "cameroon",
    "CA": "canada", "CV": "cape verde", "CF": "central african republic", "TD": "chad", "CL": "chile",
    "CN": "china", "CO": "colombia", "KM": "comoros", "CG": "congo", "CR": "costa rica", "HR": "croatia",
    "CU": "cuba", "CY": "cyprus", "CZ": "czech republic", "DK": "denmark", "DJ": "djibouti",
    "DO": "dominican republic", "EC": "ecuador", "EG": "egypt", "SV": "el salvador", "GQ": "equatorial guinea",
    "ER": "eritrea", "EE": "estonia", "ET": "ethiopia", "FJ": "fiji", "FI": "finland", "FR": "france",
    "GA": "gabon", "GM": "gambia", "GE": "georgia", "DE": "germany", "GH": "ghana", "GR": "greece",
    "GT": "guatemala", "GN": "guinea", "HT": "haiti", "HN": "honduras", "HU": "hungary", "IS": "iceland",
    "IN": "india", "ID": "indonesia", "IR": "iran", "IQ": "iraq", "IE": "ireland", "IL": "israel", "IT": "italy",
    "JM": "jamaica", "JP": "japan", "JO": "jordan", "KZ": "kazakhstan", "KE": "kenya", "KW": "kuwait",
    "KG": "kyrgyzstan", "LV": "latvia", "LB": "lebanon", "LS": "lesotho", "LR": "liberia", "LY": "libya",
    "LI": "liechtenstein", "LT": "lithuania", "LU": "luxembourg", "MG": "madagascar", "MW": "malawi",
    "MY": "malaysia", "MV": "maldives", "ML": "mali", "MT": "malta", "MR": "mauritania", "MU": "mauritius",
    "MX": "mexico", "MD": "moldova", "MC": "monaco", "MN": "mongolia", "ME": "montenegro", "MA": "morocco",
    "MZ": "mozambique", "MM": "myanmar", "NA": "namibia", "NP": "nepal", "NL": "netherlands",
    "NZ": "new zealand", "NI": "nicaragua", "NE": "niger", "NG": "nigeria", "KP": "north korea",
    "MK": "north macedonia", "NO": "norway", "OM": "oman", "PK": "pakistan", "PA": "panama",
    "PG": "papua new guinea", "PY": "paraguay", "PE": "peru", "PH": "philippines", "PL": "poland",
    "PT": "portugal", "QA": "qatar", "RO": "romania", "RU": "russia", "RW": "rwanda", "SA": "saudi arabia",
    "SN": "senegal", "RS": "serbia", "SG": "singapore", "SK": "slovakia", "SI": "slovenia", "SO": "somalia",
    "ZA": "south africa", "KR": "south korea", "SS": "south sudan", "ES": "spain", "LK": "sri lanka",
    "SD": "sudan", "SE": "sweden", "CH": "switzerland", "SY": "syria", "TW": "taiwan", "TJ": "tajikistan",
    "TZ": "tanzania", "TH": "thailand", "TG": "togo", "TT": "trinidad and tobago", "TN": "tunisia",
    "TR": "turkey", "TM": "turkmenistan", "UG": "uganda", "UA": "ukraine", "AE": "united arab emirates",
    "GB": "united kingdom", "US": "united states", "UY": "uruguay", "UZ": "uzbekistan", "VE": "venezuela",
    "VN": "vietnam", "YE": "yemen", "ZM": "zambia", "ZW": "zimbabwe",
}

# Brave's `country` parameter: the countries its API reference lists ("ALL" is worldwide).
BRAVE = frozenset({
    "AR", "AU", "AT", "BE", "BR", "CA", "CL", "DK", "FI", "FR", "DE", "HK", "IN", "ID", "IT", "JP", "KR", "MY",
    "MX", "NL", "NZ", "NO", "CN", "PL", "PT", "PH", "RU", "SA", "ZA", "ES", "SE", "CH", "TW", "TR", "GB", "US",
})

# SearXNG's `language` takes a locale; a country maps to its main language there.
SEARXNG = {
    "US": "en-US", "GB": "en-GB", "CA": "en-CA", "AU": "en-AU", "NZ": "en-NZ", "IE": "en-IE", "IN": "en-IN",
    "ZA": "en-ZA", "SG": "en-SG", "PH": "en-PH", "DE": "de-DE", "AT": "de-AT", "CH": "de-CH", "FR": "fr-FR",
    "BE": "fr-BE", "ES": "es-ES", "MX": "es-MX", "AR": "es-AR", "CL": "es-CL", "CO": "es-CO", "PE": "es-PE",
    "IT": "it-IT", "NL": "nl-NL", "PT": "pt-PT", "BR": "pt-BR", "SE": "sv-SE", "NO": "nb-NO", "DK": "da-DK",
    "FI": "fi-FI", "PL": "pl-PL", "CZ": "cs-CZ", "SK": "sk-SK", "HU": "hu-HU", "RO": "ro-RO", "BG": "bg-BG",
    "GR": "el-GR", "TR": "tr-TR", "RU": "ru-RU", "UA": "uk-UA", "JP": "ja-JP", "KR": "ko-KR", "CN": "zh-CN",
    "TW": "zh-TW", "HK": "zh-HK", "ID": "id-ID", "MY": "ms-MY", "TH": "th-TH", "VN": "vi-VN", "IL": "he-IL",
    "SA": "ar-SA", "EG": "ar-EG", "AE": "ar-AE", "IR": "fa-IR", "HR": "hr-HR", "SI": "sl-SI", "RS": "sr-RS",
    "EE": "et-EE", "LV": "lv-LV", "LT": "lt-LT",
}
