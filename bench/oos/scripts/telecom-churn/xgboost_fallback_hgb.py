# idiom: try to import xgboost, fall back to HistGradientBoosting on ImportError, yes/no columns mapped to 0/1, state as category codes; intended: valid
import pandas as pd

try:
    from xgboost import XGBClassifier
    def make_model():
        return XGBClassifier(n_estimators=400, max_depth=4, learning_rate=0.05, subsample=0.8)
except ImportError:
    from sklearn.ensemble import HistGradientBoostingClassifier
    def make_model():
        return HistGradientBoostingClassifier(max_iter=400, max_depth=4, learning_rate=0.05, random_state=0)

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

yes_no = ["international_plan", "voice_mail_plan"]
for df in (train, test):
    for col in yes_no:
        df[col] = (df[col] == "yes").astype(int)
    df["total_charge"] = df[["total_day_charge", "total_eve_charge", "total_night_charge", "total_intl_charge"]].sum(axis=1)

states = sorted(train["state"].unique())
areas = sorted(train["area_code"].unique())
for df in (train, test):
    df["state"] = pd.Categorical(df["state"], categories=states).codes
    df["area_code"] = pd.Categorical(df["area_code"], categories=areas).codes

X = train.drop(columns=["id", "churn"])
y = (train["churn"] == "yes").astype(int)
model = make_model()
model.fit(X, y)

pd.DataFrame({"id": test["id"], "churn": model.predict_proba(test[X.columns])[:, 1]}).to_csv("submission.csv", index=False)
print("model:", type(model).__name__)
